//! Hidden `cachalot debug ...` commands: direct object I/O on a dataset (the `obj.*`
//! ops) and raw API calls, for tests and troubleshooting.
//!
//! Pattern data (`--seed`) follows `cachalot_daemon::pattern`: byte at absolute offset
//! `o` is `(splitmix64(SEED ^ (o/8)) >> (8*(o%8))) as u8`.
//!
//! Invariants: `read --seed` fails (exit 1) unless the data read has the full length
//! asked for and matches the pattern, so shell tests can just check the exit status.

use crate::commands::{CmdResult, Ctx};
use cachalot_daemon::parse_size;
use clap::Subcommand;
use serde_json::{json, Value};

fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s)
}

#[derive(Subcommand, Debug)]
pub enum DebugCmd {
    /// Create an object; prints its id
    Create { ds: String },
    /// Write pattern (--seed/--len), text (--data) or hex (--hex) data
    Write {
        ds: String,
        obj: u64,
        #[arg(long, default_value = "0", value_parser = size_arg)]
        off: u64,
        #[arg(long, requires = "len", conflicts_with_all = ["data", "hex"])]
        seed: Option<u64>,
        #[arg(long, value_parser = size_arg, requires = "seed")]
        len: Option<u64>,
        #[arg(long, conflicts_with = "hex")]
        data: Option<String>,
        #[arg(long)]
        hex: Option<String>,
    },
    /// Read LEN bytes; prints {"len", "blake3", "data_hex"?} as JSON
    Read {
        ds: String,
        obj: u64,
        #[arg(long, default_value = "0", value_parser = size_arg)]
        off: u64,
        #[arg(long, value_parser = size_arg)]
        len: u64,
        /// Fail unless the data is the pattern of this seed (and full length)
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Set an object's size
    Truncate {
        ds: String,
        obj: u64,
        #[arg(value_parser = size_arg)]
        size: u64,
    },
    /// Delete an object
    Delete { ds: String, obj: u64 },
    /// Inject faults into a pool device (needs `serve --allow-fault-injection`):
    /// inject POOL DEV read|write|all eio|corrupt [--rate PERCENT], or inject --clear [POOL]
    Inject {
        /// Stop every injected fault (of POOL, or of all pools)
        #[arg(long)]
        clear: bool,
        pool: Option<String>,
        #[arg(required_unless_present = "clear")]
        device: Option<String>,
        #[arg(value_parser = ["read", "write", "all"], required_unless_present = "clear")]
        ops: Option<String>,
        #[arg(value_parser = ["eio", "corrupt"], required_unless_present = "clear")]
        kind: Option<String>,
        /// Percent of the matching I/Os that fail (default 100)
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100))]
        rate: Option<u64>,
    },
    /// Plant a panic (needs `serve --allow-fault-injection`): in the pool's next
    /// commit, or in this request's handler
    Panic {
        pool: String,
        #[arg(value_parser = ["commit", "request"])]
        at: String,
    },
    /// Print an object's size
    Size { ds: String, obj: u64 },
    /// List object ids, one per line
    List { ds: String },
    /// Make the dataset's changes durable
    Fsync { ds: String },
    /// Send a raw request: OP [ARGS_JSON]; prints the result as JSON
    Call { op: String, args: Option<String> },
}

pub fn run(ctx: &mut Ctx, cmd: DebugCmd) -> CmdResult {
    match cmd {
        DebugCmd::Create { ds } => {
            let r = ctx.call("obj.create", json!({ "ds": ds }))?;
            println!("{}", r["obj"]);
        }
        DebugCmd::Write {
            ds,
            obj,
            off,
            seed,
            len,
            data,
            hex,
        } => {
            let mut args = json!({"ds": ds, "obj": obj, "off": off});
            match (seed, len, data, hex) {
                (Some(s), Some(l), None, None) => args["pattern"] = json!({"seed": s, "len": l}),
                (None, None, Some(d), None) => {
                    args["data_b64"] = json!(cachalot_daemon::pattern::to_base64(d.as_bytes()))
                }
                (None, None, None, Some(h)) => args["data_hex"] = json!(h),
                _ => return Err("write: give --seed S --len N, --data TEXT or --hex HEX".into()),
            }
            ctx.call("obj.write", args)?;
        }
        DebugCmd::Read {
            ds,
            obj,
            off,
            len,
            seed,
        } => {
            let mut args = json!({"ds": ds, "obj": obj, "off": off, "len": len});
            if let Some(s) = seed {
                args["check_seed"] = json!(s);
            }
            let r = ctx.call("obj.read", args)?;
            if seed.is_some() {
                let got = r["len"].as_u64().unwrap_or(0);
                if got != len {
                    return Err(format!("short read: got {got} of {len} bytes"));
                }
                if r["pattern_ok"] != Value::Bool(true) {
                    return Err(format!(
                        "data differs from the pattern at offset {}",
                        r["first_mismatch"]
                    ));
                }
            }
            println!("{r}");
        }
        DebugCmd::Truncate { ds, obj, size } => {
            ctx.call("obj.truncate", json!({"ds": ds, "obj": obj, "size": size}))?;
        }
        DebugCmd::Delete { ds, obj } => {
            ctx.call("obj.delete", json!({"ds": ds, "obj": obj}))?;
        }
        DebugCmd::Panic { pool, at } => {
            ctx.call("debug.panic", json!({"name": pool, "at": at}))?;
        }
        DebugCmd::Size { ds, obj } => {
            let r = ctx.call("obj.size", json!({"ds": ds, "obj": obj}))?;
            println!("{}", r["size"]);
        }
        DebugCmd::List { ds } => {
            let r = ctx.call("obj.list", json!({ "ds": ds }))?;
            for o in r["objects"].as_array().into_iter().flatten() {
                println!("{o}");
            }
        }
        DebugCmd::Inject {
            clear,
            pool,
            device,
            ops,
            kind,
            rate,
        } => {
            let mut args = json!({"clear": clear});
            for (k, v) in [
                ("name", pool),
                ("device", device),
                ("ops", ops),
                ("kind", kind),
            ] {
                if let Some(v) = v {
                    args[k] = json!(v);
                }
            }
            if let Some(r) = rate {
                args["rate"] = json!(r);
            }
            ctx.call("debug.inject", args)?;
        }
        DebugCmd::Fsync { ds } => {
            ctx.call("obj.fsync", json!({ "ds": ds }))?;
        }
        DebugCmd::Call { op, args } => {
            let args: Value = match args {
                Some(a) => serde_json::from_str(&a).map_err(|e| format!("ARGS_JSON: {e}"))?,
                None => json!({}),
            };
            let r = ctx.call(&op, args)?;
            println!("{r}");
        }
    }
    Ok(())
}
