//! `cachalot token create NAME | list | revoke NAME`: named API tokens for HTTP
//! clients. Over the unix socket only (root): the daemon refuses these over HTTP.
//!
//! Invariant: the secret is printed once, by `create`, on stdout alone (so
//! `TOKEN=$(cachalot token create ci)` captures it); nothing else ever shows it.

use crate::commands::{CmdResult, Ctx};
use crate::table::Table;
use cachalot_daemon::api::requests::{TokenCreate, TokenList, TokenRevoke};
use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum TokenCmd {
    /// Create a token; prints its secret once (use it as 'Authorization: Bearer SECRET')
    Create { name: String },
    /// List the tokens (names and creation times, never the secrets)
    List {
        /// Scripted: no header, tab-separated
        #[arg(short = 'H')]
        scripted: bool,
    },
    /// Revoke a token: requests carrying it are refused from now on
    Revoke { name: String },
}

pub fn run(ctx: &mut Ctx, cmd: TokenCmd) -> CmdResult {
    match cmd {
        TokenCmd::Create { name } => {
            let r = ctx.send(&TokenCreate { name })?;
            println!("{}", r["token"].as_str().unwrap_or_default());
            Ok(())
        }
        TokenCmd::Revoke { name } => ctx.send(&TokenRevoke { name }).map(drop),
        TokenCmd::List { scripted } => {
            let rows = ctx.send(&TokenList {})?;
            let mut t = Table::new(vec!["NAME".into(), "CREATED".into()], vec![false, false]);
            for r in rows.as_array().into_iter().flatten() {
                let created = match r["created"].as_u64() {
                    Some(s) => crate::table::format_date(s),
                    None => "- (HOME/token)".into(),
                };
                t.rows
                    .push(vec![r["name"].as_str().unwrap_or("-").to_string(), created]);
            }
            print!("{}", t.render(scripted));
            Ok(())
        }
    }
}
