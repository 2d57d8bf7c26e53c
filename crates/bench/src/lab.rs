//! The lab of a study: the checks made before anything is started (targets,
//! names, output directory, root for baselines) and the set of targets, including
//! the loop-device baselines it creates and removes.
//!
//! Invariants:
//! - [`Lab::open`] changes nothing on the machine except creating the output
//!   directory (last, after every other check) and a private run directory; any
//!   error before that leaves nothing behind.
//! - Targets are named uniquely; their paths are absolute directories.
//! - [`Lab::teardown`] (also run on drop) removes every baseline, and only then the
//!   run directory, so a mount is never deleted through.

use crate::baseline::Baseline;
use crate::fsinfo;
use crate::results::TargetInfo;
use crate::spec::{format_size, BaselineSpec, TargetSpec};
use crate::tools::Tools;
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};

/// Options shared by both studies.
#[derive(Debug, Clone, Default)]
pub struct LabOptions {
    pub targets: Vec<TargetSpec>,
    pub baselines: Vec<BaselineSpec>,
    /// Where baseline images go (default /var/tmp).
    pub baseline_dir: Option<PathBuf>,
    pub out: PathBuf,
    /// (target name, Cachalot dataset).
    pub datasets: Vec<(String, String)>,
}

/// What a finished study hands back to the CLI.
pub struct Outcome {
    pub out: PathBuf,
    /// The report's main table (Markdown).
    pub main_table: String,
}

/// One target as the study sees it.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    /// Absolute path (for a baseline: its mount point, once created).
    pub path: PathBuf,
    pub dataset: Option<String>,
    /// Index into the baseline specs when this target is a baseline.
    baseline: Option<usize>,
}

impl Target {
    pub fn is_baseline(&self) -> bool {
        self.baseline.is_some()
    }
}

pub struct Lab {
    pub out: PathBuf,
    pub logs: PathBuf,
    pub targets: Vec<Target>,
    pub tools: Tools,
    specs: Vec<BaselineSpec>,
    image_dir: PathBuf,
    baselines: Vec<Baseline>,
    run_dir: Option<tempfile::TempDir>,
}

fn absolute(p: &Path) -> Result<PathBuf> {
    if p.is_absolute() {
        Ok(p.to_path_buf())
    } else {
        Ok(std::env::current_dir()
            .context("cannot determine the current directory")?
            .join(p))
    }
}

/// Check that `p` is an existing, writable directory; returns it canonical.
fn check_dir(what: &str, p: &Path) -> Result<PathBuf> {
    let meta = std::fs::metadata(p).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => anyhow!("{what} {} does not exist", p.display()),
        _ => anyhow!("{what} {}: {e}", p.display()),
    })?;
    if !meta.is_dir() {
        bail!("{what} {} is not a directory", p.display());
    }
    if !fsinfo::writable(p) {
        bail!("{what} {} is not writable", p.display());
    }
    p.canonicalize()
        .with_context(|| format!("{what} {}", p.display()))
}

/// Create the output directory (and parents) and prove it is writable.
fn open_out(out: &Path) -> Result<PathBuf> {
    let out = absolute(out)?;
    std::fs::create_dir_all(&out)
        .map_err(|e| anyhow!("cannot create --out {}: {e}", out.display()))?;
    if !out.is_dir() {
        bail!("--out {} is not a directory", out.display());
    }
    let probe = out.join(".cachalot-bench-write-test");
    std::fs::write(&probe, b"x")
        .map_err(|e| anyhow!("cannot write to --out {}: {e}", out.display()))?;
    let _ = std::fs::remove_file(&probe);
    let logs = out.join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| anyhow!("cannot create {}: {e}", logs.display()))?;
    Ok(out)
}

impl Lab {
    /// Check everything and prepare the lab. `tools` must already hold every
    /// program the study needs.
    pub fn open(opts: &LabOptions, tools: Tools) -> Result<Lab> {
        if opts.targets.is_empty() && opts.baselines.is_empty() {
            bail!("no targets: give --target NAME=PATH and/or --baseline ext4|xfs|btrfs[:SIZE]");
        }
        let mut names: Vec<&str> = opts.targets.iter().map(|t| t.name.as_str()).collect();
        names.extend(opts.baselines.iter().map(|b| b.name.as_str()));
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                bail!("target name '{n}' is used twice (name baselines with NAME=FS[:SIZE])");
            }
        }
        for (t, ds) in &opts.datasets {
            if !names.contains(&t.as_str()) {
                bail!("--dataset {t}={ds}: no target named '{t}'");
            }
        }
        let mut targets = Vec::new();
        for t in &opts.targets {
            targets.push(Target {
                name: t.name.clone(),
                path: check_dir(&format!("target '{}':", t.name), &t.path)?,
                dataset: None,
                baseline: None,
            });
        }
        let image_dir = match &opts.baseline_dir {
            Some(d) => absolute(d)?,
            None => PathBuf::from("/var/tmp"),
        };
        if !opts.baselines.is_empty() {
            if !crate::machine::is_root() {
                bail!("--baseline needs root (losetup, mkfs, mount)");
            }
            let image_dir = check_dir("--baseline-dir", &image_dir)?;
            if fsinfo::fs_type(&image_dir) == "tmpfs" {
                bail!(
                    "--baseline-dir {} is on tmpfs: the baseline would live in RAM (use a disk-backed directory)",
                    image_dir.display()
                );
            }
            let need: u64 = opts.baselines.iter().map(|b| b.size / 8).sum();
            let free = fsinfo::free_bytes(&image_dir)?;
            if free < need {
                bail!(
                    "--baseline-dir {} has {} free; the baselines need at least {} to start",
                    image_dir.display(),
                    format_size(free),
                    format_size(need)
                );
            }
        }
        for (i, b) in opts.baselines.iter().enumerate() {
            targets.push(Target {
                name: b.name.clone(),
                path: PathBuf::new(),
                dataset: None,
                baseline: Some(i),
            });
        }
        for (t, ds) in &opts.datasets {
            if let Some(tg) = targets.iter_mut().find(|x| &x.name == t) {
                tg.dataset = Some(ds.clone());
            }
        }
        let run_dir = tempfile::Builder::new()
            .prefix("cachalot-bench.")
            .tempdir()
            .context("cannot create a temporary directory")?;
        std::fs::create_dir(run_dir.path().join("mnt"))
            .context("cannot create a temporary directory")?;
        let out = open_out(&opts.out)?;
        Ok(Lab {
            logs: out.join("logs"),
            out,
            targets,
            tools,
            specs: opts.baselines.clone(),
            image_dir: image_dir.canonicalize().unwrap_or(image_dir),
            baselines: Vec::new(),
            run_dir: Some(run_dir),
        })
    }

    /// Private directory for sockets, option files and pid files.
    pub fn run_dir(&self) -> &Path {
        self.run_dir.as_ref().expect("lab is open").path()
    }

    /// Indices of the targets that are baselines.
    pub fn baseline_targets(&self) -> Vec<usize> {
        (0..self.targets.len())
            .filter(|&i| self.targets[i].is_baseline())
            .collect()
    }

    /// Size of a baseline target's file system (None for other targets).
    pub fn baseline_size(&self, target: usize) -> Option<u64> {
        self.targets[target].baseline.map(|b| self.specs[b].size)
    }

    /// Create the baseline behind target `i`; its path becomes the mount point.
    pub fn create_baseline(&mut self, i: usize) -> Result<()> {
        let spec = self.targets[i]
            .baseline
            .map(|b| self.specs[b].clone())
            .ok_or_else(|| anyhow!("target '{}' is not a baseline", self.targets[i].name))?;
        let mnt = self.run_dir().join("mnt");
        let b = Baseline::create(&spec, &self.image_dir, &mnt, &self.tools)?;
        self.targets[i].path = b.mountpoint.clone();
        self.baselines.push(b);
        Ok(())
    }

    /// What the report says about each target.
    pub fn target_infos(&self) -> Vec<TargetInfo> {
        self.targets
            .iter()
            .map(|t| TargetInfo {
                name: t.name.clone(),
                path: t.path.clone(),
                fs_type: if t.path.as_os_str().is_empty() {
                    "-".into()
                } else {
                    fsinfo::fs_type(&t.path)
                },
                baseline: self
                    .baselines
                    .iter()
                    .find(|b| b.name == t.name)
                    .map(|b| b.info.clone()),
                dataset: t.dataset.clone(),
            })
            .collect()
    }

    /// Remove baselines (newest first), then the run directory. Returns the
    /// problems met; idempotent.
    pub fn teardown(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        while let Some(mut b) = self.baselines.pop() {
            problems.extend(b.teardown());
        }
        if let Some(d) = self.run_dir.take() {
            let p = d.path().to_path_buf();
            if let Err(e) = d.close() {
                problems.push(format!("cannot remove {}: {e}", p.display()));
            }
        }
        problems
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for p in self.teardown() {
            eprintln!("cachalot: warning: {p}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(out: &Path) -> LabOptions {
        LabOptions {
            out: out.to_path_buf(),
            ..LabOptions::default()
        }
    }

    fn err(o: &LabOptions) -> String {
        match Lab::open(o, Tools::default()) {
            Ok(_) => panic!("expected an error"),
            Err(e) => format!("{e:#}"),
        }
    }

    #[test]
    fn bad_targets_are_refused_before_the_out_dir_is_made() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        let mut o = opts(&out);
        assert!(err(&o).contains("no targets"));
        o.targets.push(TargetSpec {
            name: "a".into(),
            path: d.path().join("missing"),
        });
        assert!(err(&o).contains("does not exist"), "{}", err(&o));
        std::fs::write(d.path().join("file"), b"").unwrap();
        o.targets[0].path = d.path().join("file");
        assert!(err(&o).contains("is not a directory"));
        o.targets[0].path = d.path().to_path_buf();
        o.targets.push(TargetSpec {
            name: "a".into(),
            path: d.path().to_path_buf(),
        });
        assert!(err(&o).contains("used twice"));
        o.targets.pop();
        o.datasets.push(("zz".into(), "tank/db".into()));
        assert!(err(&o).contains("no target named 'zz'"));
        assert!(!out.exists(), "a failed check created the output directory");
    }

    #[test]
    fn unwritable_out_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("file"), b"").unwrap();
        let mut o = opts(&d.path().join("file").join("out"));
        o.targets.push(TargetSpec {
            name: "a".into(),
            path: d.path().to_path_buf(),
        });
        assert!(err(&o).contains("cannot create --out"), "{}", err(&o));
    }

    #[test]
    fn a_good_lab_opens_and_cleans_its_run_dir() {
        let d = tempfile::tempdir().unwrap();
        let mut o = opts(&d.path().join("out"));
        o.targets.push(TargetSpec {
            name: "a".into(),
            path: d.path().to_path_buf(),
        });
        o.datasets.push(("a".into(), "tank/db".into()));
        let mut lab = Lab::open(&o, Tools::default()).unwrap();
        assert!(lab.logs.is_dir());
        assert_eq!(lab.targets[0].dataset.as_deref(), Some("tank/db"));
        let run = lab.run_dir().to_path_buf();
        assert!(run.is_dir());
        assert!(lab.teardown().is_empty());
        assert!(!run.exists());
    }
}
