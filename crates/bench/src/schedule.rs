//! The order of work in a study, decided before anything runs, so the progress
//! bar knows every step and its expected duration.
//!
//! Interleaving: within a variant and pass, each thread count (or fio job) is run
//! on every target before the next one starts, and the target order alternates
//! (A B, B A, A B, ...) so slow drift of the machine hits every target alike.
//!
//! Invariants:
//! - Pure functions of the plan; the executor runs the steps in exactly this order.
//! - Every (variant, target) gets its server set up (prepared or restarted) and
//!   warmed up before any of its measured points.

use crate::presets::Variant;

/// A step of the MySQL study.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MysqlStep {
    /// Create the target's baseline file system (loop device).
    Baseline { target: usize },
    /// Fresh server: (stop,) initialise the datadir, start, create the schema,
    /// sysbench prepare, restart so the buffer pool starts cold.
    Prepare { variant: usize, target: usize },
    /// Restart the server with the variant's settings on the existing data.
    Restart { variant: usize, target: usize },
    /// sync and drop the page cache (root only; otherwise skipped).
    DropCaches,
    /// Unmeasured sysbench run.
    WarmUp { variant: usize, target: usize },
    /// One measured sysbench run.
    Point {
        variant: usize,
        target: usize,
        threads: u32,
        pass: u32,
    },
}

/// Targets in the order of round `k` (alternating).
pub fn round_order(n_targets: usize, k: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n_targets).collect();
    if k % 2 == 1 {
        v.reverse();
    }
    v
}

/// All steps of a MySQL study. `baselines` lists the targets that are baselines.
pub fn mysql(
    baselines: &[usize],
    n_targets: usize,
    variants: &[Variant],
    threads: &[u32],
    passes: u32,
) -> Vec<MysqlStep> {
    let mut steps: Vec<MysqlStep> = baselines
        .iter()
        .map(|&t| MysqlStep::Baseline { target: t })
        .collect();
    for (vi, v) in variants.iter().enumerate() {
        for t in 0..n_targets {
            steps.push(if vi == 0 || v.fresh_data() {
                MysqlStep::Prepare {
                    variant: vi,
                    target: t,
                }
            } else {
                MysqlStep::Restart {
                    variant: vi,
                    target: t,
                }
            });
        }
        steps.push(MysqlStep::DropCaches);
        for t in 0..n_targets {
            steps.push(MysqlStep::WarmUp {
                variant: vi,
                target: t,
            });
        }
        for pass in 0..passes {
            for (i, &th) in threads.iter().enumerate() {
                for t in round_order(n_targets, i + pass as usize) {
                    steps.push(MysqlStep::Point {
                        variant: vi,
                        target: t,
                        threads: th,
                        pass,
                    });
                }
            }
        }
    }
    steps
}

/// A step of the fio study.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FioStep {
    Baseline {
        target: usize,
    },
    /// Write the test file once.
    Layout {
        target: usize,
    },
    /// One measured job (the page cache is dropped first when possible).
    Job {
        job: usize,
        target: usize,
        pass: u32,
    },
}

/// All steps of a fio study.
pub fn fio(baselines: &[usize], n_targets: usize, n_jobs: usize, passes: u32) -> Vec<FioStep> {
    let mut steps: Vec<FioStep> = baselines
        .iter()
        .map(|&t| FioStep::Baseline { target: t })
        .collect();
    steps.extend((0..n_targets).map(|t| FioStep::Layout { target: t }));
    for pass in 0..passes {
        for job in 0..n_jobs {
            for t in round_order(n_targets, job + pass as usize) {
                steps.push(FioStep::Job {
                    job,
                    target: t,
                    pass,
                });
            }
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::{plan, Preset};

    #[test]
    fn targets_alternate_within_a_sweep() {
        let v = plan(None).variants;
        let s = mysql(&[1], 2, &v, &[1, 4, 16], 1);
        assert_eq!(s[0], MysqlStep::Baseline { target: 1 });
        let points: Vec<(usize, u32)> = s
            .iter()
            .filter_map(|st| match *st {
                MysqlStep::Point {
                    target, threads, ..
                } => Some((target, threads)),
                _ => None,
            })
            .collect();
        assert_eq!(
            points,
            vec![(0, 1), (1, 1), (1, 4), (0, 4), (0, 16), (1, 16)]
        );
        // Setup and warm-up of both targets come before the first point.
        let first_point = s
            .iter()
            .position(|x| matches!(x, MysqlStep::Point { .. }))
            .unwrap();
        assert_eq!(
            s[..first_point]
                .iter()
                .filter(|x| matches!(x, MysqlStep::Prepare { .. }))
                .count(),
            2
        );
        assert_eq!(
            s[..first_point]
                .iter()
                .filter(|x| matches!(x, MysqlStep::WarmUp { .. }))
                .count(),
            2
        );
    }

    #[test]
    fn variants_restart_or_prepare_fresh() {
        let f = mysql(&[], 2, &plan(Some(Preset::FlushMethod)).variants, &[16], 1);
        assert_eq!(
            f.iter()
                .filter(|x| matches!(x, MysqlStep::Prepare { .. }))
                .count(),
            2
        );
        assert_eq!(
            f.iter()
                .filter(|x| matches!(x, MysqlStep::Restart { .. }))
                .count(),
            4
        );
        let c = mysql(&[], 1, &plan(Some(Preset::Compression)).variants, &[16], 1);
        assert_eq!(
            c.iter()
                .filter(|x| matches!(x, MysqlStep::Prepare { .. }))
                .count(),
            3
        );
        assert_eq!(
            c.iter()
                .filter(|x| matches!(x, MysqlStep::Restart { .. }))
                .count(),
            0
        );
    }

    #[test]
    fn passes_repeat_every_point() {
        let s = mysql(&[], 3, &plan(None).variants, &[1, 2], 3);
        let n = s
            .iter()
            .filter(|x| matches!(x, MysqlStep::Point { .. }))
            .count();
        assert_eq!(n, 3 * 2 * 3);
    }

    #[test]
    fn fio_jobs_interleave() {
        let s = fio(&[0], 2, 2, 1);
        assert_eq!(
            s,
            vec![
                FioStep::Baseline { target: 0 },
                FioStep::Layout { target: 0 },
                FioStep::Layout { target: 1 },
                FioStep::Job {
                    job: 0,
                    target: 0,
                    pass: 0
                },
                FioStep::Job {
                    job: 0,
                    target: 1,
                    pass: 0
                },
                FioStep::Job {
                    job: 1,
                    target: 1,
                    pass: 0
                },
                FioStep::Job {
                    job: 1,
                    target: 0,
                    pass: 0
                },
            ]
        );
    }
}
