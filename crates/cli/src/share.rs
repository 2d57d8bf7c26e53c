//! `cachalot share list [-H]`: every protocol share (NFS, NBD, iSCSI) with NAME PROTOCOL PATH-OR-TARGET CLIENTS STATE.

use crate::commands::{CmdResult, Ctx};
use crate::table::Table;
use clap::Subcommand;
use serde_json::json;

#[derive(Subcommand, Debug)]
pub enum ShareCmd {
    /// List shares: share list [-H]
    List {
        /// Scripted: no header, tab-separated
        #[arg(short = 'H')]
        scripted: bool,
    },
}

pub fn run(ctx: &mut Ctx, cmd: ShareCmd) -> CmdResult {
    let ShareCmd::List { scripted } = cmd;
    let rows = ctx.call("share.list", json!({}))?;
    let mut t = Table::new(
        ["NAME", "PROTOCOL", "PATH-OR-TARGET", "CLIENTS", "STATE"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        vec![false; 5],
    );
    for r in rows.as_array().into_iter().flatten() {
        let s = |k: &str| r[k].as_str().unwrap_or("-").to_string();
        // NFS names an allow-list (a string); the block protocols list who is
        // connected (an array, possibly empty).
        let clients = match r["clients"].as_array() {
            Some(list) if list.is_empty() => "-".to_string(),
            Some(list) => list
                .iter()
                .filter_map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join(","),
            None => s("clients"),
        };
        t.rows.push(vec![
            s("name"),
            s("protocol"),
            s("path"),
            clients,
            s("state"),
        ]);
    }
    print!("{}", t.render(scripted));
    Ok(())
}
