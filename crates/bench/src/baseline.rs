//! `--baseline ext4|xfs|btrfs[:SIZE]`: a fresh file system on a loop device, used as
//! one more target and removed afterwards. Method (docs/baselines.md): a sparse
//! image file, `losetup --direct-io=on` (so the loop device does not double-cache
//! in the host's page cache), mkfs, mount on a private directory.
//!
//! Invariants:
//! - Teardown undoes exactly the steps that succeeded, in reverse: unmount (lazy
//!   unmount as a last resort), detach every loop device backed by the image (the
//!   one losetup named, checked in sysfs so it works even if the image was deleted
//!   behind our back, plus any `losetup -j` finds, so a device whose name we never
//!   learned is detached too), delete the image, remove the mount directory.
//! - Teardown runs on drop as well, and ignores the interrupt flag (Ctrl-C must
//!   leave nothing behind); it is idempotent.
//! - Whoever uses the mount must have stopped its processes before teardown (a
//!   busy mount falls back to a lazy unmount, reported as a warning).

use crate::exec::{self, Mode};
use crate::spec::{format_size, BaselineSpec, FsKind};
use crate::tools::Tools;
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

const STEP_TIMEOUT: Duration = Duration::from_secs(600);
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(120);

/// What a baseline is, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct BaselineInfo {
    pub fs: FsKind,
    pub size_bytes: u64,
    pub image: PathBuf,
    pub device: String,
    pub mkfs: String,
    pub loop_direct_io: bool,
    /// File system holding the image (tmpfs would make the baseline meaningless).
    pub image_fs: String,
}

/// A mounted loop-device file system, torn down on drop.
pub struct Baseline {
    tools: Tools,
    pub name: String,
    pub info: BaselineInfo,
    pub mountpoint: PathBuf,
    image_created: bool,
    mounted: bool,
    mountpoint_created: bool,
}

impl Baseline {
    /// Create the image in `image_dir` and mount it under `mount_root/NAME`.
    pub fn create(
        spec: &BaselineSpec,
        image_dir: &Path,
        mount_root: &Path,
        tools: &Tools,
    ) -> Result<Baseline> {
        let image = image_dir.join(format!(
            "cachalot-bench-{}-{}.img",
            spec.name,
            std::process::id()
        ));
        let mut b = Baseline {
            tools: tools.clone(),
            name: spec.name.clone(),
            info: BaselineInfo {
                fs: spec.fs,
                size_bytes: spec.size,
                image: image.clone(),
                device: String::new(),
                mkfs: format!("{} {}", spec.fs.mkfs(), spec.fs.mkfs_args().join(" ")),
                loop_direct_io: true,
                image_fs: crate::fsinfo::fs_type(image_dir),
            },
            mountpoint: mount_root.join(&spec.name),
            image_created: false,
            mounted: false,
            mountpoint_created: false,
        };
        b.build(spec).with_context(|| {
            format!(
                "baseline '{}' ({} {})",
                spec.name,
                spec.fs.as_str(),
                format_size(spec.size)
            )
        })?;
        Ok(b)
    }

    fn build(&mut self, spec: &BaselineSpec) -> Result<()> {
        let image = self.info.image.clone();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&image)
            .with_context(|| format!("cannot create image {}", image.display()))?;
        self.image_created = true;
        f.set_len(spec.size)
            .with_context(|| format!("cannot size image {}", image.display()))?;
        drop(f);

        let mut c = self.tools.cmd("losetup");
        c.args(["--find", "--show", "--direct-io=on"]).arg(&image);
        let out = exec::run_ok(&mut c, "losetup", STEP_TIMEOUT, Mode::Interruptible)?;
        self.info.device = out.stdout.trim().to_string();
        if !out.stderr.trim().is_empty() {
            // losetup warns (and carries on) when direct I/O cannot be enabled.
            self.info.loop_direct_io = !out.stderr.contains("direct");
        }

        let mut c = self.tools.cmd(spec.fs.mkfs());
        c.args(spec.fs.mkfs_args()).arg(&self.info.device);
        exec::run_ok(&mut c, spec.fs.mkfs(), STEP_TIMEOUT, Mode::Interruptible)?;

        std::fs::create_dir(&self.mountpoint)
            .with_context(|| format!("cannot create {}", self.mountpoint.display()))?;
        self.mountpoint_created = true;
        let mut c = self.tools.cmd("mount");
        c.arg(&self.info.device).arg(&self.mountpoint);
        exec::run_ok(&mut c, "mount", STEP_TIMEOUT, Mode::Interruptible)?;
        self.mounted = true;
        Ok(())
    }

    /// Loop devices currently backed by our image: the one losetup gave us (if
    /// the kernel still says it is backed by our image, even deleted) and any
    /// other `losetup -j` finds.
    fn devices(&self) -> Vec<String> {
        let mut devs = Vec::new();
        let image = self.info.image.to_string_lossy().into_owned();
        if let Some(name) = self.info.device.strip_prefix("/dev/") {
            let f = format!("/sys/block/{name}/loop/backing_file");
            if let Ok(b) = std::fs::read_to_string(f) {
                let b = b.trim();
                if b == image || b.strip_suffix(" (deleted)") == Some(&image) {
                    devs.push(self.info.device.clone());
                }
            }
        }
        let mut c = self.tools.cmd("losetup");
        c.arg("-j").arg(&self.info.image);
        if let Ok(o) = exec::run(&mut c, "losetup -j", CLEANUP_TIMEOUT, Mode::Cleanup) {
            for d in o
                .stdout
                .lines()
                .filter_map(|l| l.split_once(':').map(|(d, _)| d.trim().to_string()))
            {
                if !d.is_empty() && !devs.contains(&d) {
                    devs.push(d);
                }
            }
        }
        devs
    }

    /// Undo everything; returns the problems met (empty when all went well).
    pub fn teardown(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.mounted {
            let mut c = self.tools.cmd("umount");
            c.arg(&self.mountpoint);
            if let Err(e) = exec::run_ok(&mut c, "umount", CLEANUP_TIMEOUT, Mode::Cleanup) {
                let mut c = self.tools.cmd("umount");
                c.arg("-l").arg(&self.mountpoint);
                let _ = exec::run_ok(&mut c, "umount -l", CLEANUP_TIMEOUT, Mode::Cleanup);
                problems.push(format!("{e:#} (unmounted lazily)"));
            }
            self.mounted = false;
        }
        if self.image_created {
            for dev in self.devices() {
                let mut c = self.tools.cmd("losetup");
                c.arg("-d").arg(&dev);
                if let Err(e) = exec::run_ok(&mut c, "losetup -d", CLEANUP_TIMEOUT, Mode::Cleanup) {
                    problems.push(format!("{dev}: {e:#}"));
                }
            }
            if let Err(e) = std::fs::remove_file(&self.info.image) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    problems.push(format!("cannot remove {}: {e}", self.info.image.display()));
                }
            }
            self.image_created = false;
        }
        if self.mountpoint_created {
            let _ = std::fs::remove_dir(&self.mountpoint);
            self.mountpoint_created = false;
        }
        problems
            .into_iter()
            .map(|p| format!("baseline '{}': {p}", self.name))
            .collect()
    }
}

impl Drop for Baseline {
    fn drop(&mut self) {
        for p in self.teardown() {
            eprintln!("cachalot: warning: {p}");
        }
    }
}
