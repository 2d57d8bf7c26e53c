//! `cachalot mount FS [PATH]` and `cachalot unmount [-f] FS` (zfs style). Without
//! arguments, `mount` lists what is mounted.
//!
//! Invariant: the path sent to the daemon is absolute (the daemon's working
//! directory is not the caller's). The requests are the typed ones the REST
//! routes `POST /api/v1/datasets/{name}/mount|unmount` send too.

use crate::commands::{absolute, CmdResult, Ctx};
use cachalot_api_types::requests::{FsMount, FsMounts, FsUnmount};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct MountArgs {
    /// Filesystem dataset (none: list mounted filesystems)
    pub name: Option<String>,
    /// Mount point (default: the dataset's mountpoint property)
    pub path: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct UnmountArgs {
    /// Unmount even if busy (open files lose access)
    #[arg(short = 'f')]
    pub force: bool,
    pub name: String,
}

pub fn mount(ctx: &mut Ctx, a: MountArgs) -> CmdResult {
    let Some(name) = a.name else {
        let list = ctx.send(&FsMounts {})?;
        for m in list.as_array().into_iter().flatten() {
            println!(
                "{}\t{}",
                m["name"].as_str().unwrap_or("-"),
                m["path"].as_str().unwrap_or("-")
            );
        }
        return Ok(());
    };
    let path = match a.path {
        Some(p) => Some(absolute(&p)?.to_string_lossy().into_owned()),
        None => None,
    };
    ctx.send(&FsMount { name, path }).map(drop)
}

pub fn unmount(ctx: &mut Ctx, a: UnmountArgs) -> CmdResult {
    ctx.send(&FsUnmount {
        name: a.name,
        force: a.force,
    })
    .map(drop)
}
