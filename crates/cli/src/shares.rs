//! `cachalot share list [-H]`: protocol exports (iSCSI targets, ...) and their clients.

use crate::commands::{CmdResult, Ctx};
use crate::table::Table;
use clap::Subcommand;
use serde_json::json;

#[derive(Subcommand, Debug)]
pub enum ShareCmd {
    /// List shares: NAME PROTOCOL PATH-OR-TARGET CLIENTS STATE
    List {
        /// Scripted mode: no header, tab-separated
        #[arg(short = 'H')]
        scripted: bool,
    },
}

pub fn run(ctx: &mut Ctx, c: ShareCmd) -> CmdResult {
    let ShareCmd::List { scripted } = c;
    let rows = ctx.call("share.list", json!({}))?;
    let cols = ["name", "protocol", "path", "clients", "state"];
    let mut t = Table::new(
        ["NAME", "PROTOCOL", "PATH-OR-TARGET", "CLIENTS", "STATE"]
            .map(String::from)
            .to_vec(),
        vec![false; cols.len()],
    );
    for r in rows.as_array().into_iter().flatten() {
        t.rows.push(
            cols.iter()
                .map(|c| match r[*c].as_str() {
                    Some("") | None => "-".to_string(),
                    Some(v) => v.to_string(),
                })
                .collect(),
        );
    }
    print!("{}", t.render(scripted));
    Ok(())
}
