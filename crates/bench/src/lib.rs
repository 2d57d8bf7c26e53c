//! `cachalot bench`: the benchmark lab. Runs sysbench OLTP on private MariaDB
//! servers and fio against several targets side by side (directories, Cachalot
//! mounts, and loop-device baselines it creates), with presets that reproduce the
//! classic MySQL storage studies, and writes report.md, results.json and plots.
//!
//! Modules, one job each:
//! - `cli`: the clap arguments and the entry point.
//! - `lab`: the targets (with baselines) and the output directory; `preflight`:
//!   the other checks made before anything starts.
//! - `mysql_study`, `fio_study`: run a study's schedule; `outputs`: write results.
//! - `dataset`: a target's Cachalot dataset (compression, compressratio).
//! - `schedule`: the interleaved order of steps; `presets`: the classic studies.
//! - `mariadb`: private servers; `sysbench`, `fio`: command lines and parsers.
//! - `baseline`: loop-device file systems; `fsinfo`, `machine`, `tools`: facts.
//! - `results`, `report`: results.json, report.md; `charts`, `plot`: which plots,
//!   and drawing them as SVG and PNG.
//! - `exec`, `signals`, `progress`: child processes, Ctrl-C, the progress bar.
//!
//! Invariants (kept by every study): bad input is refused before anything starts;
//! everything started (servers, loop devices, mounts, temp files) is stopped or
//! removed, also on failure and Ctrl-C; what was measured is always written out.

pub mod baseline;
pub mod charts;
pub mod cli;
pub mod dataset;
pub mod exec;
pub mod fio;
pub mod fio_study;
pub mod fsinfo;
pub mod lab;
pub mod machine;
pub mod mariadb;
pub mod mysql_study;
pub mod outputs;
pub mod plot;
pub mod preflight;
pub mod presets;
pub mod progress;
pub mod report;
pub mod results;
pub mod schedule;
pub mod signals;
pub mod spec;
pub mod sysbench;
pub mod tools;

#[cfg(test)]
mod testdata;
