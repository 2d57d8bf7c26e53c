//! `cachalot snapshot [-r] FS@SNAP...`, `rollback [-r] FS@SNAP`,
//! `clone [-o PROP=VAL]... FS@SNAP NEWFS`, `promote CLONE` and
//! `diff [-F] [-H] FS@SNAP [FS@SNAP2|FS]` (zfs style).
//! Several names given to `snapshot` are one atomic snapshot.

use crate::commands::{CmdResult, Ctx};
use cachalot_daemon::api::requests::{
    Props, SnapClone, SnapCreate, SnapDiff, SnapPromote, SnapRollback,
};
use clap::Args;

#[derive(Args, Debug)]
pub struct SnapshotArgs {
    /// Also snapshot every descendant (one atomic snapshot)
    #[arg(short = 'r')]
    pub recursive: bool,
    /// FS@SNAP names (several: one atomic snapshot)
    #[arg(required = true)]
    pub names: Vec<String>,
}

#[derive(Args, Debug)]
pub struct RollbackArgs {
    /// Destroy newer snapshots first
    #[arg(short = 'r')]
    pub recursive: bool,
    pub name: String,
}

#[derive(Args, Debug)]
pub struct CloneArgs {
    /// Property of the new clone (repeatable)
    #[arg(short = 'o', value_name = "PROP=VAL")]
    pub props: Vec<String>,
    pub snapshot: String,
    pub target: String,
}

#[derive(Args, Debug)]
pub struct PromoteArgs {
    pub name: String,
}

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// Show each path's file type (F file, / directory, @ symlink, | fifo,
    /// = socket, B block device, C character device)
    #[arg(short = 'F')]
    pub types: bool,
    /// Scriptable: a rename's two paths in two tab-separated fields, no arrow
    #[arg(short = 'H')]
    pub scripted: bool,
    /// The earlier snapshot, FS@SNAP
    pub snapshot: String,
    /// A later snapshot of FS, or FS itself (its state now; the default)
    pub to: Option<String>,
}

pub fn snapshot(ctx: &mut Ctx, a: SnapshotArgs) -> CmdResult {
    ctx.send(&SnapCreate {
        names: a.names,
        recursive: a.recursive,
    })
    .map(drop)
}

pub fn rollback(ctx: &mut Ctx, a: RollbackArgs) -> CmdResult {
    ctx.send(&SnapRollback {
        name: a.name,
        recursive: a.recursive,
    })
    .map(drop)
}

pub fn clone(ctx: &mut Ctx, a: CloneArgs) -> CmdResult {
    if let Some(p) = a.props.iter().find(|p| !p.contains('=')) {
        return Err(format!("'{p}' is not PROP=VAL"));
    }
    ctx.send(&SnapClone {
        name: a.snapshot,
        target: a.target,
        props: Props::from_list(a.props),
    })
    .map(drop)
}

pub fn promote(ctx: &mut Ctx, a: PromoteArgs) -> CmdResult {
    ctx.send(&SnapPromote { name: a.name }).map(drop)
}

/// One line per changed path, as zfs diff prints it: `M\t/path`,
/// `R\t/old -> /new` (`-H`: `R\t/old\t/new`), with `-F` the type after the change.
pub fn diff(ctx: &mut Ctx, a: DiffArgs) -> CmdResult {
    let v = ctx.send(&SnapDiff {
        name: a.snapshot,
        to: a.to,
    })?;
    let rows = v["changes"].as_array().cloned().unwrap_or_default();
    for r in rows {
        let field = |k: &str| r[k].as_str().unwrap_or("").to_string();
        let mut line = field("change");
        if a.types {
            line = format!("{line}\t{}", field("type"));
        }
        line = format!("{line}\t{}", field("path"));
        if let Some(n) = r["new_path"].as_str() {
            let sep = if a.scripted { "\t" } else { " -> " };
            line = format!("{line}{sep}{n}");
        }
        println!("{line}");
    }
    Ok(())
}
