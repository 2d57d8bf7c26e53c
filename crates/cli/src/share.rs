//! `share list`: protocol exports and their clients.

use crate::commands::{CmdResult, Ctx};
use crate::table::Table;
use serde_json::json;

pub fn list(ctx: &mut Ctx, scripted: bool) -> CmdResult {
    let rows = ctx.call("share.list", json!({}))?;
    let cols = ["NAME", "PROTOCOL", "PATH-OR-TARGET", "CLIENTS", "STATE"];
    let mut t = Table::new(cols.map(String::from).to_vec(), vec![false; cols.len()]);
    for r in rows.as_array().into_iter().flatten() {
        let s = |k: &str| r[k].as_str().unwrap_or("-").to_string();
        let clients: Vec<&str> = r["clients"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_str())
            .collect();
        let clients = if clients.is_empty() {
            "-".to_string()
        } else {
            clients.join(",")
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
