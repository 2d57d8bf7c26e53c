//! `cachalot snapshot [-r] FS@SNAP...`, `rollback [-r] FS@SNAP`,
//! `clone [-o PROP=VAL]... FS@SNAP NEWFS` and `promote CLONE` (zfs style).
//! Several names given to `snapshot` are one atomic snapshot.

use crate::commands::{CmdResult, Ctx};
use cachalot_daemon::api::requests::{Props, SnapClone, SnapCreate, SnapPromote, SnapRollback};
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
