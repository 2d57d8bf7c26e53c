//! Command implementations: each turns parsed arguments into daemon requests and
//! prints the results zfs-style.
//!
//! Invariants:
//! - Commands print to stdout only on success; every error is returned as one
//!   message (printed by `main`), never printed half-way.
//! - Paths sent to the daemon are absolute.

use crate::table::Table;
use crate::{Cli, Cmd, CreateArgs, GetArgs, ListArgs, PoolCmd, ServeArgs};
use cachalot_daemon::api::requests::{
    DsCreate, DsDestroy, DsGet, DsInherit, DsList, DsSet, Op, PoolAdd, PoolAttach, PoolClear,
    PoolCreate, PoolDestroy, PoolDetach, PoolExport, PoolImport, PoolList, PoolOffline, PoolOnline,
    PoolRemove, PoolReplace, PoolScrub, PoolStatus, Props, SnapHold, SnapHolds, SnapRelease,
};
use cachalot_daemon::client::{default_home, default_socket, Client};
use cachalot_daemon::format_size;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

pub type CmdResult = Result<(), String>;

/// Vdev-spec words that are not paths.
const VDEV_KEYWORDS: &[&str] = &[
    "mirror", "raidz", "raidz1", "raidz2", "raidz3", "log", "cache", "spare", "special", "dedup",
];

pub fn absolute(p: &Path) -> Result<PathBuf, String> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    let cwd = std::env::current_dir()
        .map_err(|e| format!("cannot determine the current directory: {e}"))?;
    Ok(cwd.join(p))
}

fn vdev_words(words: &[String]) -> Result<Vec<String>, String> {
    words
        .iter()
        .map(|w| {
            if VDEV_KEYWORDS.contains(&w.as_str()) {
                Ok(w.clone())
            } else {
                absolute(Path::new(w)).map(|p| p.to_string_lossy().into_owned())
            }
        })
        .collect()
}

/// The socket to talk to: --socket, $CACHALOT_SOCKET, $CACHALOT_HOME/cachalot.sock.
fn socket_path(cli_socket: &Option<PathBuf>) -> PathBuf {
    cli_socket.clone().unwrap_or_else(default_socket)
}

/// A connected client, created on first use.
pub struct Ctx {
    socket: PathBuf,
    client: Option<Client>,
}

impl Ctx {
    pub fn call(&mut self, op: &str, args: Value) -> Result<Value, String> {
        self.client()?.call(op, args)
    }

    /// Send one typed request (the definition the REST routes use too).
    pub fn send<R: Op>(&mut self, r: &R) -> Result<Value, String> {
        self.client()?.send(r)
    }

    /// The connection to the daemon, made on first use.
    pub fn client(&mut self) -> Result<&mut Client, String> {
        if self.client.is_none() {
            self.client = Some(Client::connect(&self.socket)?);
        }
        self.client
            .as_mut()
            .ok_or_else(|| "not connected".to_string())
    }
}

pub fn run(cli: Cli) -> CmdResult {
    if let Cmd::Serve(a) = &cli.cmd {
        return serve(a, &cli.socket);
    }
    let mut ctx = Ctx {
        socket: socket_path(&cli.socket),
        client: None,
    };
    match cli.cmd {
        Cmd::Serve(_) => unreachable!("handled above"),
        Cmd::Pool(p) => pool(&mut ctx, p),
        Cmd::Create(a) => create(&mut ctx, a),
        Cmd::List(a) => list(&mut ctx, a),
        Cmd::Get(a) => get(&mut ctx, a),
        Cmd::Set(a) => {
            let (name, assigns) = a.args.split_last().ok_or("set: missing arguments")?;
            if assigns.is_empty() {
                return Err("set: expected PROP=VAL NAME".into());
            }
            let mut pairs = Vec::new();
            for s in assigns {
                let (k, v) = s
                    .split_once('=')
                    .ok_or_else(|| format!("set: '{s}' is not PROP=VAL"))?;
                if k.is_empty() {
                    return Err(format!("set: '{s}' has an empty property name"));
                }
                pairs.push((k.to_string(), v.to_string()));
            }
            for (prop, value) in pairs {
                ctx.send(&DsSet {
                    name: name.clone(),
                    prop,
                    value,
                })?;
            }
            Ok(())
        }
        Cmd::Inherit(a) => {
            for n in &a.names {
                ctx.send(&DsInherit {
                    name: n.clone(),
                    prop: a.prop.clone(),
                })?;
            }
            Ok(())
        }
        Cmd::Destroy(a) => {
            ctx.send(&DsDestroy {
                name: a.name,
                recursive: a.recursive,
                force: a.force,
            })?;
            Ok(())
        }
        Cmd::Debug(d) => crate::debug::run(&mut ctx, d),
        Cmd::Token(t) => crate::token::run(&mut ctx, t),
        Cmd::Mysql(m) => crate::mysql::run(m, cli.socket.clone()),
        Cmd::Bench(a) => cachalot_bench::cli::run(a).map_err(|e| format!("{e:#}")),
        Cmd::Hold { tag, snapshot } => ctx
            .send(&SnapHold {
                name: snapshot,
                tag,
            })
            .map(drop),
        Cmd::Release { tag, snapshot } => ctx
            .send(&SnapRelease {
                name: snapshot,
                tag,
            })
            .map(drop),
        Cmd::Holds { scripted, snapshot } => {
            let r = ctx.send(&SnapHolds {
                name: snapshot.clone(),
            })?;
            let mut t = Table::new(vec!["NAME".into(), "TAG".into()], vec![false, false]);
            for tag in r["holds"].as_array().into_iter().flatten() {
                t.rows.push(vec![
                    snapshot.clone(),
                    tag.as_str().unwrap_or("").to_string(),
                ]);
            }
            print!("{}", t.render(scripted));
            Ok(())
        }
        Cmd::Snapshot(a) => crate::snapshot::snapshot(&mut ctx, a),
        Cmd::Rollback(a) => crate::snapshot::rollback(&mut ctx, a),
        Cmd::Clone(a) => crate::snapshot::clone(&mut ctx, a),
        Cmd::Promote(a) => crate::snapshot::promote(&mut ctx, a),
        Cmd::Diff(a) => crate::snapshot::diff(&mut ctx, a),
        Cmd::Send(a) => crate::stream::send(&mut ctx, a),
        Cmd::Receive(a) => crate::stream::receive(&mut ctx, a),
        Cmd::Mount(a) => crate::mount::mount(&mut ctx, a),
        Cmd::Unmount(a) => crate::mount::unmount(&mut ctx, a),
        Cmd::Analytics(a) => crate::analytics::run(&mut ctx, a),
        Cmd::Completion(a) => crate::completion::completion(&a),
        Cmd::Manpage => crate::completion::manpage(),
        Cmd::Share(a) => crate::share::run(&mut ctx, a),
        Cmd::Replication(a) => crate::replication::run(&mut ctx, a),
    }
}

fn serve(a: &ServeArgs, socket: &Option<PathBuf>) -> CmdResult {
    let exposed = crate::http_addr::reachable_from_other_hosts(&a.http);
    let mut opts = cachalot_daemon::ServeOpts::default();
    let home = match &a.home {
        Some(h) => absolute(h)?,
        None => default_home(),
    };
    opts.socket = match socket {
        Some(s) => absolute(s)?,
        None => match std::env::var_os("CACHALOT_SOCKET") {
            Some(s) if !s.is_empty() => absolute(Path::new(&s))?,
            _ => home.join("cachalot.sock"),
        },
    };
    opts.home = home;
    opts.http = a.http.clone();
    opts.iscsi = a.iscsi.clone();
    if let Some(m) = a.arc_max {
        opts.arc_max = m;
    }
    opts.nfs.addr = a.nfs.clone();
    opts.nfs.portmap = a.portmap.clone();
    opts.nfs.lease_secs = a.nfs4_lease;
    opts.allow_fault_injection = a.allow_fault_injection;
    opts.analytics.enabled = a.analytics == "on";
    opts.analytics.retention.seconds = a.analytics_seconds as usize;
    opts.analytics.retention.minutes = a.analytics_minutes as usize;
    opts.nbd = a.nbd.clone();
    opts.replication = a.replication.clone();
    if exposed || a.tls_cert.is_some() {
        let abs = |p: &Option<PathBuf>| p.as_deref().map(absolute).transpose();
        opts.tls = Some(cachalot_daemon::api::tls::TlsOpts {
            cert: abs(&a.tls_cert)?,
            key: abs(&a.tls_key)?,
        });
    }
    cachalot_daemon::serve(opts).map_err(|e| format!("{e:#}"))
}

// ---- pools ----

fn parse_pool_opts(props: &[String]) -> Result<Option<u64>, String> {
    let mut ashift = None;
    for p in props {
        match p.split_once('=') {
            Some(("ashift", v)) => {
                ashift = Some(
                    v.parse::<u64>()
                        .map_err(|_| format!("invalid ashift '{v}'"))?,
                )
            }
            Some((k, _)) => {
                return Err(format!(
                    "unknown pool property '{k}' (use -O for dataset properties)"
                ))
            }
            None => return Err(format!("'{p}' is not PROP=VAL")),
        }
    }
    Ok(ashift)
}

fn pool(ctx: &mut Ctx, cmd: PoolCmd) -> CmdResult {
    match cmd {
        PoolCmd::Create {
            force,
            size,
            pool_props,
            fs_props,
            pool,
            vdevs,
        } => {
            ctx.send(&PoolCreate {
                name: pool,
                vdevs: vdev_words(&vdevs)?,
                size: size.map(Into::into),
                ashift: parse_pool_opts(&pool_props)?,
                force,
                props: Props::from_list(fs_props),
            })?;
            Ok(())
        }
        PoolCmd::Import { dirs, rewind, pool } => {
            let dirs: Vec<String> = dirs
                .iter()
                .map(|d| absolute(d).map(|p| p.to_string_lossy().into_owned()))
                .collect::<Result<_, _>>()?;
            match pool {
                Some(p) => {
                    ctx.send(&PoolImport {
                        dirs,
                        name: Some(p),
                        rewind,
                    })?;
                }
                None => {
                    let found = ctx.send(&PoolImport {
                        dirs,
                        name: None,
                        rewind: false,
                    })?;
                    print!("{}", crate::status::render_importable(&found));
                }
            }
            Ok(())
        }
        PoolCmd::Export { pool } => ctx.send(&PoolExport { name: pool }).map(drop),
        PoolCmd::Destroy { pool, .. } => ctx.send(&PoolDestroy { name: pool }).map(drop),
        PoolCmd::List {
            scripted,
            parsable,
            pool,
        } => {
            let rows = ctx.send(&PoolList { name: pool })?;
            print!("{}", render_pool_list(&rows, scripted, parsable));
            Ok(())
        }
        PoolCmd::Status { pool } => {
            let st = ctx.send(&PoolStatus { name: pool })?;
            print!("{}", crate::status::render_status(&st));
            Ok(())
        }
        PoolCmd::Scrub { wait, pool } => ctx.send(&PoolScrub { name: pool, wait }).map(drop),
        PoolCmd::Add {
            force,
            size,
            pool,
            vdevs,
        } => ctx
            .send(&PoolAdd {
                name: pool,
                vdevs: vdev_words(&vdevs)?,
                size: size.map(Into::into),
                force,
            })
            .map(drop),
        PoolCmd::Replace {
            force,
            size,
            pool,
            old,
            new,
        } => {
            // OLD may be a missing device: absolute only if it names a path.
            let old = device_arg(&old)?;
            // No NEW: a new disk in OLD's place (the daemon maps a guid to its path).
            let new = match new {
                Some(n) => absolute(Path::new(&n)).map(|p| p.to_string_lossy().into_owned())?,
                None => old.clone(),
            };
            ctx.send(&PoolReplace {
                name: pool,
                old,
                new: Some(new),
                size: size.map(Into::into),
                force,
            })
            .map(drop)
        }
        PoolCmd::Attach {
            force,
            size,
            pool,
            device,
            new,
        } => {
            let new = absolute(Path::new(&new)).map(|p| p.to_string_lossy().into_owned())?;
            ctx.send(&PoolAttach {
                name: pool,
                device: device_arg(&device)?,
                new,
                size: size.map(Into::into),
                force,
            })
            .map(drop)
        }
        PoolCmd::Detach { pool, device } => ctx
            .send(&PoolDetach {
                name: pool,
                device: device_arg(&device)?,
            })
            .map(drop),
        PoolCmd::Offline { pool, device } => ctx
            .send(&PoolOffline {
                name: pool,
                device: device_arg(&device)?,
            })
            .map(drop),
        PoolCmd::Online { pool, device } => ctx
            .send(&PoolOnline {
                name: pool,
                device: device_arg(&device)?,
            })
            .map(drop),
        PoolCmd::Remove { pool, device } => ctx
            .send(&PoolRemove {
                name: pool,
                device: device_arg(&device)?,
            })
            .map(drop),
        PoolCmd::Sync { pool } => ctx.call("pool.sync", json!({ "name": pool })).map(drop),
        PoolCmd::Clear { pool } => {
            let r = ctx.send(&PoolClear { name: pool.clone() })?;
            if r["reimported"].as_bool() == Some(false) {
                println!("pool '{pool}' is not suspended: nothing to clear");
            }
            Ok(())
        }
    }
}

/// A pool device named on the command line: a path (made absolute, it may be
/// missing) or a guid.
fn device_arg(dev: &str) -> Result<String, String> {
    if dev.contains('/') || Path::new(dev).exists() {
        absolute(Path::new(dev)).map(|p| p.to_string_lossy().into_owned())
    } else {
        Ok(dev.to_string())
    }
}

fn num_cell(v: &Value, parsable: bool, fmt: impl Fn(u64) -> String) -> String {
    match v.as_u64() {
        Some(n) if parsable => n.to_string(),
        Some(n) => fmt(n),
        None => "-".into(),
    }
}

pub fn render_pool_list(rows: &Value, scripted: bool, parsable: bool) -> String {
    let mut t = Table::new(
        ["NAME", "SIZE", "ALLOC", "FREE", "FRAG", "CAP", "HEALTH"]
            .map(String::from)
            .to_vec(),
        vec![false, true, true, true, true, true, false],
    );
    let pct = |n: u64| format!("{n}%");
    for r in rows.as_array().into_iter().flatten() {
        t.rows.push(vec![
            r["name"].as_str().unwrap_or("-").to_string(),
            num_cell(&r["size"], parsable, format_size),
            num_cell(&r["alloc"], parsable, format_size),
            num_cell(&r["free"], parsable, format_size),
            num_cell(&r["frag"], parsable, pct),
            num_cell(&r["cap"], parsable, pct),
            r["health"].as_str().unwrap_or("-").to_string(),
        ]);
    }
    t.render(scripted)
}

// ---- datasets ----

fn create(ctx: &mut Ctx, a: CreateArgs) -> CmdResult {
    for p in &a.props {
        if !p.contains('=') {
            return Err(format!("'{p}' is not PROP=VAL"));
        }
    }
    ctx.send(&DsCreate {
        name: a.name,
        volume_size: a.volsize.map(Into::into),
        sparse: a.sparse,
        blocksize: a.blocksize.map(Into::into),
        props: Props::from_list(a.props),
        parents: a.parents,
    })
    .map(drop)
}

/// zfs' column headers for property names.
fn header_for(prop: &str) -> String {
    match prop {
        "available" | "avail" => "AVAIL".into(),
        "referenced" | "refer" => "REFER".into(),
        "compressratio" | "ratio" => "RATIO".into(),
        "logicalused" | "lused" => "LUSED".into(),
        "recordsize" | "recsize" => "RECSIZE".into(),
        "compression" | "compress" => "COMPRESS".into(),
        "reservation" => "RESERV".into(),
        "primarycache" => "PRIMARYCACHE".into(),
        p => p.to_uppercase(),
    }
}

fn is_numeric_col(prop: &str) -> bool {
    matches!(
        prop,
        "used"
            | "available"
            | "avail"
            | "referenced"
            | "refer"
            | "quota"
            | "reservation"
            | "recordsize"
            | "recsize"
            | "volsize"
            | "volblocksize"
            | "compressratio"
            | "ratio"
            | "logicalused"
            | "lused"
            | "written"
    )
}

fn list(ctx: &mut Ctx, a: ListArgs) -> CmdResult {
    let cols: Vec<String> = match &a.cols {
        Some(c) => c
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        None => ["name", "used", "available", "referenced", "mountpoint"]
            .map(String::from)
            .to_vec(),
    };
    if cols.is_empty() {
        return Err("list -o: no columns given".into());
    }
    // As in zfs: NAME alone lists just it; -r (or -d) adds its descendants.
    let rows = ctx.send(&DsList {
        name: a.name,
        recursive: a.recursive || a.depth.is_some(),
        depth: a.depth,
        kind: a.types,
        props: cols.clone(),
    })?;
    let mut t = Table::new(
        cols.iter().map(|c| header_for(c)).collect(),
        cols.iter().map(|c| is_numeric_col(c)).collect(),
    );
    for r in rows.as_array().into_iter().flatten() {
        let props = &r["props"];
        t.rows.push(
            cols.iter()
                .map(|c| {
                    let key = cachalot_daemon::daemon::canonical_prop(c);
                    let cell = &props[key];
                    let f = if a.parsable { "raw" } else { "value" };
                    cell[f].as_str().unwrap_or("-").to_string()
                })
                .collect(),
        );
    }
    print!("{}", t.render(a.scripted));
    Ok(())
}

fn get(ctx: &mut Ctx, a: GetArgs) -> CmdResult {
    let props: Vec<String> = a
        .props
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if props.is_empty() {
        return Err("get: no property given".into());
    }
    let fields: Vec<String> = match &a.fields {
        Some(f) => f.split(',').map(|s| s.trim().to_string()).collect(),
        None => ["name", "property", "value", "source"]
            .map(String::from)
            .to_vec(),
    };
    for f in &fields {
        if !["name", "property", "value", "source"].contains(&f.as_str()) {
            return Err(format!(
                "get -o: invalid field '{f}' (use name, property, value, source)"
            ));
        }
    }
    let mut t = Table::new(
        fields.iter().map(|f| f.to_uppercase()).collect(),
        vec![false; fields.len()],
    );
    for name in &a.names {
        let rows = ctx.send(&DsGet {
            name: name.clone(),
            props: props.clone(),
        })?;
        for r in rows.as_array().into_iter().flatten() {
            t.rows.push(
                fields
                    .iter()
                    .map(|f| {
                        let key = if f == "value" && a.parsable {
                            "raw"
                        } else {
                            f.as_str()
                        };
                        r[key].as_str().unwrap_or("-").to_string()
                    })
                    .collect(),
            );
        }
    }
    print!("{}", t.render(a.scripted));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vdev_words_absolute() {
        let w = vdev_words(&["mirror".into(), "a.img".into(), "/b.img".into()]).unwrap();
        assert_eq!(w[0], "mirror");
        assert!(w[1].starts_with('/') && w[1].ends_with("/a.img"));
        assert_eq!(w[2], "/b.img");
    }

    #[test]
    fn pool_opts() {
        assert_eq!(parse_pool_opts(&["ashift=9".into()]).unwrap(), Some(9));
        assert_eq!(parse_pool_opts(&[]).unwrap(), None);
        assert!(parse_pool_opts(&["ashift=x".into()]).is_err());
        assert!(parse_pool_opts(&["foo=1".into()]).is_err());
        assert!(parse_pool_opts(&["foo".into()]).is_err());
    }

    #[test]
    fn pool_list_formats() {
        let rows = json!([{"name": "tank", "size": 268435456u64, "alloc": 1048576, "free": 267386880,
                           "frag": 0, "cap": 0, "health": "ONLINE"},
                          {"name": "gone", "size": null, "alloc": null, "free": null,
                           "frag": null, "cap": null, "health": "UNAVAIL"}]);
        let h = render_pool_list(&rows, true, false);
        assert_eq!(
            h,
            "tank\t256M\t1M\t255M\t0%\t0%\tONLINE\ngone\t-\t-\t-\t-\t-\tUNAVAIL\n"
        );
        let p = render_pool_list(&rows, true, true);
        assert!(p.starts_with("tank\t268435456\t1048576\t267386880\t0\t0\tONLINE\n"));
        let human = render_pool_list(&rows, false, false);
        assert!(
            human.starts_with("NAME  SIZE  ALLOC  FREE  FRAG  CAP  HEALTH\n"),
            "{human}"
        );
    }
}
