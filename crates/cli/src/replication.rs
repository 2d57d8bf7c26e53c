//! `cachalot replication ...`: pairing with another appliance and the
//! relationships this appliance is the source of (see CLI.md, "Replication").

use crate::commands::{CmdResult, Ctx};
use crate::table::{format_date, Table};
use cachalot_api_types::requests::{
    ReplBreak, ReplCreate, ReplDestroy, ReplList, ReplPair, ReplPairToken, ReplPause, ReplPeers,
    ReplResume, ReplResync, ReplReverse, ReplRun, Size,
};
use cachalot_daemon::format_size;
use clap::Subcommand;
use serde_json::Value;

#[derive(Subcommand, Debug)]
pub enum ReplicationCmd {
    /// Pair with another appliance. Without arguments: print a one-time token
    /// (valid one hour) for the other appliance to pair with this one; with
    /// ADDR TOKEN: pair with the listener at ADDR using its token.
    Pair {
        /// The other appliance's replication address (HOST:PORT)
        #[arg(requires = "token")]
        address: Option<String>,
        /// The token printed by `cachalot replication pair` there
        token: Option<String>,
    },
    /// List the paired peers: KEY ADDRESS PAIRED
    Peers {
        /// Scripted: no header, tab-separated
        #[arg(short = 'H')]
        scripted: bool,
    },
    /// Create a relationship: replicate FS to HOST:PORT/FS on a schedule
    Create {
        name: String,
        /// The filesystem to replicate (on this appliance); with --mysql-socket,
        /// the MySQL set DATAFS,LOGFS (each goes next to the target FS); with
        /// --pull, HOST:PORT/FS (or HOST:PORT/DATAFS,LOGFS) on the source appliance
        #[arg(long, value_name = "FS")]
        source: String,
        /// The source is a MySQL set: each cycle takes a `mysql snapshot` of it
        /// through the server at this socket (with --pull: on the source appliance)
        #[arg(long, value_name = "SOCK")]
        mysql_socket: Option<std::path::PathBuf>,
        /// MySQL user for --mysql-socket (password: the daemon's $MYSQL_PWD)
        #[arg(long, value_name = "USER", requires = "mysql_socket")]
        mysql_user: Option<String>,
        /// Where to: HOST:PORT/FS (the other appliance's replication listener);
        /// with --pull, a filesystem on this appliance
        #[arg(long, value_name = "HOST:PORT/FS")]
        target: String,
        /// Time between cycles (30s, 5m, 1h; default 5m)
        #[arg(long, value_name = "DURATION")]
        schedule: Option<String>,
        /// Retention grid on both sides (default "1h:every 5m, 1d:every 1h, 30d:every 1d")
        #[arg(long, value_name = "RULES")]
        keep: Option<String>,
        /// Bandwidth limit in bytes per second (e.g. 50M)
        #[arg(long, value_name = "RATE")]
        bwlimit: Option<String>,
        /// Created on the target, which starts each cycle: it connects to the
        /// source and asks for the increment since the newest common snapshot
        #[arg(long)]
        pull: bool,
        /// Replicate FS and every dataset under it (one snapshot of all of
        /// them per cycle; datasets created later are picked up)
        #[arg(short = 'r', conflicts_with = "mysql_socket")]
        recursive: bool,
        /// Create it paused (no cycle until `resume` or `run`)
        #[arg(long)]
        paused: bool,
    },
    /// List relationships: NAME SOURCE TARGET STATE LAG LAST-SYNC BYTES RATE
    List {
        /// Scripted: no header, tab-separated
        #[arg(short = 'H')]
        scripted: bool,
        /// Exact numbers (seconds, bytes, unix times)
        #[arg(short = 'p')]
        parsable: bool,
        /// Also show the last error or message of each
        #[arg(short = 'v')]
        verbose: bool,
        name: Option<String>,
    },
    /// One relationship's members (of a recursive one: every dataset of the
    /// tree): MEMBER TARGET STATE LAG LAST-SNAPSHOT
    Status {
        /// Scripted: no header, tab-separated
        #[arg(short = 'H')]
        scripted: bool,
        /// Exact numbers (seconds)
        #[arg(short = 'p')]
        parsable: bool,
        name: String,
    },
    /// Run a cycle now (waits for it; after the running one, if any)
    Run { name: String },
    /// Stop scheduling cycles
    Pause { name: String },
    /// Schedule cycles again
    Resume { name: String },
    /// Break off: no more cycles; the target stays usable on its own
    Break { name: String },
    /// Roll the target back to the newest common snapshot and resume cycles
    /// (lists what that destroys; refuses without -f if anything would be lost)
    Resync {
        /// Destroy what the target has of its own since the common snapshot
        #[arg(short = 'f')]
        force: bool,
        name: String,
    },
    /// Failback after a break: the target becomes the source of relationship
    /// NAME toward its source, from the newest common snapshot (rolls the
    /// source back to it only with -f, listing what is lost). A push is
    /// reversed on its source, a pull on its target (which then pushes back)
    Reverse {
        /// Destroy what the source has of its own since the common snapshot
        #[arg(short = 'f')]
        force: bool,
        /// This appliance's replication listener (HOST:PORT) as the target
        /// reaches it (a push's reverse; a pull pushes back to the listener
        /// it pulled from)
        #[arg(long)]
        address: Option<String>,
        name: String,
    },
    /// Forget a relationship (its snapshots stay; its holds here are released)
    Destroy { name: String },
}

fn lag_text(secs: u64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

fn list(
    ctx: &mut Ctx,
    scripted: bool,
    parsable: bool,
    verbose: bool,
    name: Option<String>,
) -> CmdResult {
    let rows = ctx.send(&ReplList { name })?;
    let mut headers = vec![
        "NAME",
        "SOURCE",
        "TARGET",
        "STATE",
        "LAG",
        "LAST-SYNC",
        "BYTES",
        "RATE",
        // push, pull, or pulled-by PEER: a pull served here (holding a snapshot).
        "ROLE",
    ];
    if verbose {
        headers.push("MESSAGE");
    }
    let right = headers
        .iter()
        .map(|h| matches!(*h, "LAG" | "BYTES" | "RATE"))
        .collect();
    let mut t = Table::new(headers.iter().map(|s| s.to_string()).collect(), right);
    for r in rows.as_array().into_iter().flatten() {
        let s = |k: &str| r[k].as_str().unwrap_or("-").to_string();
        let num = |k: &str, f: &dyn Fn(u64) -> String| r[k].as_u64().map_or("-".into(), f);
        let exact = |n: u64| n.to_string();
        // A tree shows once, with how many datasets it holds.
        let source = match r["members"].as_array() {
            Some(m) if r["recursive"].as_bool() == Some(true) => {
                format!("{} (-r, {} datasets)", s("source"), m.len())
            }
            _ => s("source"),
        };
        let mut row = vec![
            s("name"),
            source,
            s("target"),
            // Alert-worthy lag shows in STATE instead of idle/running (the
            // JSON keeps both: `state` and `lagging`).
            match (s("state").as_str(), r["lagging"].as_bool()) {
                ("idle" | "running", Some(true)) => "lagging".to_string(),
                (st, _) => st.to_string(),
            },
            num("lag", if parsable { &exact } else { &lag_text }),
            num("last_success", if parsable { &exact } else { &format_date }),
            num("bytes", if parsable { &exact } else { &format_size }),
            num(
                "rate",
                if parsable {
                    &exact
                } else {
                    &|n| format!("{}/s", format_size(n))
                },
            ),
            s("role"),
        ];
        if verbose {
            row.push(
                r["last_error"]
                    .as_str()
                    .or(r["last_message"].as_str())
                    .unwrap_or("-")
                    .to_string(),
            );
        }
        t.rows.push(row);
    }
    print!("{}", t.render(scripted));
    Ok(())
}

fn status(ctx: &mut Ctx, scripted: bool, parsable: bool, name: &str) -> CmdResult {
    let rows = ctx.send(&ReplList {
        name: Some(name.to_string()),
    })?;
    let rel = &rows[0];
    let headers = ["MEMBER", "TARGET", "STATE", "LAG", "LAST-SNAPSHOT"];
    let right = headers.iter().map(|h| *h == "LAG").collect();
    let mut t = Table::new(headers.iter().map(|s| s.to_string()).collect(), right);
    let lag = |v: &Value| {
        v.as_u64().map_or("-".into(), |n| {
            if parsable {
                n.to_string()
            } else {
                lag_text(n)
            }
        })
    };
    let text = |v: &Value| v.as_str().unwrap_or("-").to_string();
    match rel["member_status"].as_array().filter(|m| !m.is_empty()) {
        Some(members) => {
            for m in members {
                t.rows.push(vec![
                    text(&m["source"]),
                    text(&m["target"]),
                    // A member destroyed on the source keeps its copy.
                    match m["state"].as_str() {
                        Some("gone") => "gone (kept on target)".into(),
                        st => st.unwrap_or("-").into(),
                    },
                    lag(&m["lag"]),
                    text(&m["last_snapshot"]),
                ]);
            }
        }
        None => t.rows.push(vec![
            text(&rel["source"]),
            text(&rel["target"]),
            text(&rel["state"]),
            lag(&rel["lag"]),
            text(&rel["last_snapshot"]),
        ]),
    }
    print!("{}", t.render(scripted));
    Ok(())
}

fn peers(ctx: &mut Ctx, scripted: bool) -> CmdResult {
    let rows = ctx.send(&ReplPeers {})?;
    let mut t = Table::new(
        vec!["KEY".into(), "ADDRESS".into(), "PAIRED".into()],
        vec![false; 3],
    );
    for p in rows.as_array().into_iter().flatten() {
        t.rows.push(vec![
            p["fingerprint"].as_str().unwrap_or("-").to_string(),
            p["address"].as_str().unwrap_or("(dialled us)").to_string(),
            p["paired"].as_u64().map_or("-".into(), format_date),
        ]);
    }
    print!("{}", t.render(scripted));
    Ok(())
}

pub fn run(ctx: &mut Ctx, cmd: ReplicationCmd) -> CmdResult {
    match cmd {
        ReplicationCmd::Pair { address: None, .. } => {
            let r = ctx.send(&ReplPairToken {})?;
            println!("{}", r["token"].as_str().unwrap_or(""));
            eprintln!(
                "this appliance's key: {}; on the other appliance run: cachalot replication pair THIS-HOST:PORT TOKEN (valid one hour, once)",
                r["fingerprint"].as_str().unwrap_or("?")
            );
            Ok(())
        }
        ReplicationCmd::Pair {
            address: Some(address),
            token,
        } => {
            let r = ctx.send(&ReplPair {
                address: address.clone(),
                // clap requires the token with an address.
                token: token.unwrap_or_default(),
            })?;
            println!(
                "paired with {address} (key {})",
                r["fingerprint"].as_str().unwrap_or("?")
            );
            Ok(())
        }
        ReplicationCmd::Peers { scripted } => peers(ctx, scripted),
        ReplicationCmd::Create {
            name,
            source,
            target,
            schedule,
            keep,
            bwlimit,
            pull,
            recursive,
            paused,
            mysql_socket,
            mysql_user,
        } => {
            let mysql_socket = mysql_socket
                .map(|p| crate::commands::absolute(&p))
                .transpose()?
                .map(|p| p.to_string_lossy().into_owned());
            ctx.send(&ReplCreate {
                name,
                source,
                target,
                schedule,
                keep,
                bwlimit: bwlimit.map(Size::Text),
                paused,
                pull,
                recursive,
                mysql_socket,
                mysql_user,
            })?;
            Ok(())
        }
        ReplicationCmd::List {
            scripted,
            parsable,
            verbose,
            name,
        } => list(ctx, scripted, parsable, verbose, name),
        ReplicationCmd::Status {
            scripted,
            parsable,
            name,
        } => status(ctx, scripted, parsable, &name),
        ReplicationCmd::Run { name } => {
            let r = ctx.send(&ReplRun { name: name.clone() })?;
            for m in r["messages"].as_array().into_iter().flatten() {
                eprintln!("replication {name}: {}", m.as_str().unwrap_or(""));
            }
            let bytes = r["bytes"].as_u64().unwrap_or(0);
            println!(
                "{}: {} in {:.1}s",
                r["snapshot"].as_str().unwrap_or("?"),
                format_size(bytes),
                r["seconds"].as_f64().unwrap_or(0.0)
            );
            Ok(())
        }
        ReplicationCmd::Pause { name } => ctx.send(&ReplPause { name }).map(drop),
        ReplicationCmd::Resume { name } => ctx.send(&ReplResume { name }).map(drop),
        ReplicationCmd::Destroy { name } => {
            ctx.send(&ReplDestroy { name })?;
            Ok(())
        }
        ReplicationCmd::Break { name } => {
            let r = ctx.send(&ReplBreak { name: name.clone() })?;
            println!(
                "replication {name} broken off: {} is no longer updated and can be used on its own (its last replicated snapshot: {}); `replication resync {name}` rolls it back and resumes",
                r["target"].as_str().unwrap_or("?"),
                r["last_snapshot"].as_str().unwrap_or("none")
            );
            Ok(())
        }
        ReplicationCmd::Reverse {
            force,
            address,
            name,
        } => reverse(ctx, &name, address.as_deref(), force),
        ReplicationCmd::Resync { force, name } => {
            let r = ctx.send(&ReplResync {
                name: name.clone(),
                force,
            })?;
            for d in r["destroyed"].as_array().into_iter().flatten() {
                println!("destroyed: {}", d.as_str().unwrap_or("?"));
            }
            println!(
                "replication {name} resynced from {}",
                r["common"].as_str().unwrap_or("(the target did not exist)")
            );
            Ok(())
        }
    }
}

fn reverse(ctx: &mut Ctx, name: &str, address: Option<&str>, force: bool) -> CmdResult {
    let r = ctx.send(&ReplReverse {
        name: name.into(),
        address: address.map(str::to_string),
        force,
    })?;
    for d in r["destroyed"].as_array().into_iter().flatten() {
        println!("destroyed: {}", d.as_str().unwrap_or("?"));
    }
    println!(
        "replication {name} reversed: {} now replicates to {} from snapshot {} ({})",
        r["source"].as_str().unwrap_or("?"),
        r["target"].as_str().unwrap_or("?"),
        r["common"].as_str().unwrap_or("?"),
        if r["here"].as_bool() == Some(true) {
            "its cycles run here"
        } else {
            "run its cycles there"
        }
    );
    Ok(())
}
