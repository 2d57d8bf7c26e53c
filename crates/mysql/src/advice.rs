//! `cachalot mysql advise`: my.cnf and dataset advice that follows from the
//! datasets' properties and the server's settings, each with its reason.
//!
//! Invariants:
//! - [`rules`] is a pure function of [`Facts`]: the same facts give the same
//!   advice, so every rule is unit-tested without a server.
//! - Advice only claims what the engine guarantees: doublewrite may go only when
//!   the data recordsize equals the InnoDB page size (a record is written whole,
//!   copy-on-write, so a page cannot tear).

use crate::daemon::Daemon;
use crate::paths::{member_of, ServerPaths};
use crate::server::{Credentials, Server};
use crate::snapshot::server_paths;
use std::path::{Path, PathBuf};

/// The properties of one dataset that matter for MySQL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DatasetFacts {
    pub name: String,
    pub recordsize: u64,
    pub compression: String,
    pub sync: String,
    pub primarycache: String,
    pub logbias: String,
}

/// The server settings that matter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerFacts {
    pub version: String,
    pub page_size: u64,
    pub doublewrite: bool,
    pub flush_method: String,
    pub buffer_pool: u64,
    pub flush_log_at_trx_commit: String,
    pub sync_binlog: String,
    pub paths: ServerPaths,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    pub server: ServerFacts,
    pub data: DatasetFacts,
    /// Dataset of the redo log directory, and of the binary logs (if on).
    pub redo: Option<DatasetFacts>,
    pub binlog: Option<DatasetFacts>,
    /// ARC size limit, and whether it is the assumed default.
    pub arc_max: u64,
    pub arc_assumed: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A my.cnf line to change.
    MyCnf,
    /// A dataset property to change (a cachalot command).
    Dataset,
    /// Something to measure before deciding.
    Measure,
    /// Already right.
    Ok,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Advice {
    pub kind: Kind,
    pub setting: String,
    pub reason: String,
}

fn adv(kind: Kind, setting: impl Into<String>, reason: impl Into<String>) -> Advice {
    Advice {
        kind,
        setting: setting.into(),
        reason: reason.into(),
    }
}

fn size(n: u64) -> String {
    cachalot_api_types::size::format_size(n)
}

/// Every rule, in the order a DBA would go through them.
pub fn rules(f: &Facts) -> Vec<Advice> {
    let mut out = Vec::new();
    let s = &f.server;
    let d = &f.data;
    let page = size(s.page_size);

    // 1. Record size vs page size.
    if d.recordsize == s.page_size {
        out.push(adv(
            Kind::Ok,
            format!("recordsize={} on {}", size(d.recordsize), d.name),
            format!("equals innodb_page_size={page}: each page write is one record, no read-modify-write"),
        ));
    } else {
        out.push(adv(
            Kind::Dataset,
            format!("cachalot set recordsize={page} {}", d.name),
            format!(
                "recordsize={} differs from innodb_page_size={page}: every page write then {} (applies to files created afterwards: rebuild tables, e.g. ALTER TABLE ... FORCE, or restore a dump)",
                size(d.recordsize),
                if d.recordsize > s.page_size { "rewrites a larger record (read-modify-write)" } else { "spans several records, which can tear" }
            ),
        ));
    }

    // 2. Doublewrite.
    match (s.doublewrite, d.recordsize == s.page_size) {
        (true, true) => out.push(adv(
            Kind::MyCnf,
            "innodb_doublewrite = 0",
            "copy-on-write never overwrites a live record and a page is exactly one record, so a page write cannot tear: the doublewrite buffer only doubles the write volume",
        )),
        (false, false) => out.push(adv(
            Kind::MyCnf,
            "innodb_doublewrite = 1",
            "recordsize differs from the page size, so a page write is not one atomic record: keep doublewrite on until recordsize matches",
        )),
        (false, true) => out.push(adv(
            Kind::Ok,
            "innodb_doublewrite = 0",
            "safe here: recordsize equals the page size and records are written copy-on-write",
        )),
        (true, false) => out.push(adv(
            Kind::Ok,
            "innodb_doublewrite = 1",
            "needed while recordsize differs from the page size",
        )),
    }

    // 3. Flush method: no universal answer.
    out.push(adv(
        Kind::Measure,
        format!("innodb_flush_method (now {})", if s.flush_method.is_empty() { "default" } else { &s.flush_method }),
        "O_DIRECT keeps the kernel page cache from holding a third copy of pages (buffer pool, ARC); fsync and O_DSYNC differ a lot per storage: compare them with 'cachalot bench mysql' on this dataset before choosing",
    ));

    // 4. Buffer pool vs ARC.
    let arc = format!(
        "{}{}",
        size(f.arc_max),
        if f.arc_assumed {
            " (assumed default: 1/8 of RAM; pass --arc-size)"
        } else {
            ""
        }
    );
    if s.buffer_pool >= f.arc_max && d.primarycache == "all" {
        out.push(adv(
            Kind::Dataset,
            format!("cachalot set primarycache=metadata {}", d.name),
            format!(
                "the buffer pool ({}) is at least the ARC ({arc}): caching the same pages twice wastes the ARC; keep metadata cached only",
                size(s.buffer_pool)
            ),
        ));
    } else if s.buffer_pool < f.arc_max && d.primarycache != "all" {
        out.push(adv(
            Kind::Dataset,
            format!("cachalot set primarycache=all {}", d.name),
            format!(
                "the buffer pool ({}) is smaller than the ARC ({arc}): the ARC can serve as a second-level page cache (a small buffer pool over a large storage cache ran 2-5x faster in published tests)",
                size(s.buffer_pool)
            ),
        ));
    } else {
        out.push(adv(
            Kind::Ok,
            format!("primarycache={} on {}", d.primarycache, d.name),
            format!(
                "fits a buffer pool of {} with an ARC of {arc}",
                size(s.buffer_pool)
            ),
        ));
    }

    // 5. Log placement.
    log_rules(
        &mut out,
        "InnoDB redo log",
        "innodb_log_group_home_dir",
        f.redo.as_ref(),
        d,
    );
    match &f.binlog {
        None => out.push(adv(
            Kind::MyCnf,
            "log_bin = <log dataset mount>/binlog",
            "binary logging is off: snapshots then record no binlog position and a clone cannot become a replica; with it on, 'mysql clone --replica-of' starts from the recorded GTID",
        )),
        Some(b) => log_rules(&mut out, "binary log", "log_bin", Some(b), d),
    }

    // 6. Durability settings.
    for (ds, what) in [(Some(d), "data"), (f.redo.as_ref(), "redo log")] {
        if let Some(ds) = ds {
            if ds.sync == "disabled" {
                out.push(adv(
                    Kind::Dataset,
                    format!("cachalot set sync=standard {}", ds.name),
                    format!("sync=disabled on the {what} dataset acknowledges fsync before data is stable: a crash loses committed transactions"),
                ));
            }
        }
    }
    if s.flush_log_at_trx_commit != "1" || (f.binlog.is_some() && s.sync_binlog != "1") {
        out.push(adv(
            Kind::MyCnf,
            "innodb_flush_log_at_trx_commit = 1, sync_binlog = 1",
            "the intent log makes each fsync a short sequential append, so full durability costs little here",
        ));
    }
    if d.compression == "off" {
        out.push(adv(
            Kind::Dataset,
            format!("cachalot set compression=lz4 {}", d.name),
            "InnoDB pages usually compress well and lz4 runs at transaction-group commit, off the commit latency path",
        ));
    }
    out
}

fn log_rules(
    out: &mut Vec<Advice>,
    what: &str,
    var: &str,
    ds: Option<&DatasetFacts>,
    data: &DatasetFacts,
) {
    let Some(ds) = ds else { return };
    if ds.name == data.name {
        out.push(adv(
            Kind::MyCnf,
            format!("{var} = <a separate dataset, recordsize=128K>"),
            format!(
                "the {what} is on the data dataset {}: logs are written sequentially and want 128K records, and a separate log dataset can be snapshotted with the data (mysql snapshot DATA,LOG) and tuned on its own: cachalot create -o recordsize=128K POOL/mysql/log",
                data.name
            ),
        ));
    } else if ds.recordsize != 128 * 1024 {
        out.push(adv(
            Kind::Dataset,
            format!("cachalot set recordsize=128K {}", ds.name),
            format!(
                "the {what} is written sequentially: 128K records write it in large blocks (now {})",
                size(ds.recordsize)
            ),
        ));
    } else {
        out.push(adv(
            Kind::Ok,
            format!("{what} on {} (recordsize=128K)", ds.name),
            "a separate dataset with large records for sequential log writes",
        ));
    }
    if ds.logbias == "throughput" {
        out.push(adv(
            Kind::Dataset,
            format!("cachalot set logbias=latency {}", ds.name),
            format!("logbias=throughput makes every {what} fsync wait for a larger write: commits get slower"),
        ));
    }
}

/// Collect the facts from the server and the daemon. `data_fs`: the dataset that
/// holds the datadir (default: found from the mounts).
pub fn gather(
    daemon: &mut Daemon,
    socket: &Path,
    creds: &Credentials,
    data_fs: Option<&str>,
    arc_max: Option<u64>,
) -> Result<Facts, String> {
    let rt = crate::runtime()?;
    rt.block_on(async {
        let mut s = Server::connect(socket, creds).await?;
        let paths = server_paths(&mut s).await?;
        let var = |v: Option<String>| v.unwrap_or_default();
        let num = |v: Option<String>| v.and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        let server = ServerFacts {
            version: s.version_string.clone(),
            page_size: num(s.var("innodb_page_size").await?),
            doublewrite: matches!(var(s.var("innodb_doublewrite").await?).as_str(), "ON" | "1"),
            flush_method: var(s.var("innodb_flush_method").await?),
            buffer_pool: num(s.var("innodb_buffer_pool_size").await?),
            flush_log_at_trx_commit: var(s.var("innodb_flush_log_at_trx_commit").await?),
            sync_binlog: var(s.var("sync_binlog").await?),
            paths,
        };
        s.close().await;
        facts_from(daemon, server, data_fs, arc_max)
    })
}

fn facts_from(
    daemon: &mut Daemon,
    server: ServerFacts,
    data_fs: Option<&str>,
    arc_max: Option<u64>,
) -> Result<Facts, String> {
    let mounts = daemon.mounts()?;
    let (names, points): (Vec<String>, Vec<PathBuf>) = mounts
        .into_iter()
        .map(|(n, p)| (n, crate::paths::canonical(&p)))
        .unzip();
    let on = |p: &Path| member_of(p, &points).map(|i| names[i].clone());
    let datadir = &server.paths.datadir;
    let data_name = match (data_fs, on(datadir)) {
        (Some(fs), Some(found)) if fs == found => found,
        (Some(fs), found) => {
            return Err(format!(
                "the server's datadir {} is not on '{fs}'{}",
                datadir.display(),
                found
                    .map(|f| format!(" (it is on '{f}')"))
                    .unwrap_or_default()
            ))
        }
        (None, Some(found)) => found,
        (None, None) => {
            return Err(format!(
                "the server's datadir {} is not on a mounted cachalot filesystem",
                datadir.display()
            ))
        }
    };
    let mut ds = |name: &str| -> Result<DatasetFacts, String> {
        let p = daemon.get(
            name,
            &[
                "recordsize",
                "compression",
                "sync",
                "primarycache",
                "logbias",
            ],
        )?;
        let g = |k: &str| p.get(k).cloned().unwrap_or_default();
        Ok(DatasetFacts {
            name: name.to_string(),
            recordsize: g("recordsize").parse().unwrap_or(0),
            compression: g("compression"),
            sync: g("sync"),
            primarycache: g("primarycache"),
            logbias: g("logbias"),
        })
    };
    let data = ds(&data_name)?;
    let redo = match on(&server.paths.redo_dir) {
        Some(n) => Some(ds(&n)?),
        None => None,
    };
    let binlog = match server.paths.binlog_basename.as_deref().and_then(on) {
        Some(n) => Some(ds(&n)?),
        None => None,
    };
    let (arc_max, arc_assumed) = match arc_max {
        Some(a) => (a, false),
        None => (cachalot_arc::default_arc_max(), true),
    };
    Ok(Facts {
        server,
        data,
        redo,
        binlog,
        arc_max,
        arc_assumed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        let data = DatasetFacts {
            name: "tank/db/data".into(),
            recordsize: 16384,
            compression: "lz4".into(),
            sync: "standard".into(),
            primarycache: "all".into(),
            logbias: "latency".into(),
        };
        let log = DatasetFacts {
            name: "tank/db/log".into(),
            recordsize: 131072,
            ..data.clone()
        };
        Facts {
            server: ServerFacts {
                version: "10.11".into(),
                page_size: 16384,
                doublewrite: true,
                flush_method: "O_DIRECT".into(),
                buffer_pool: 128 << 20,
                flush_log_at_trx_commit: "1".into(),
                sync_binlog: "1".into(),
                paths: ServerPaths::default(),
            },
            data,
            redo: Some(log.clone()),
            binlog: Some(log),
            arc_max: 1 << 30,
            arc_assumed: false,
        }
    }

    fn find<'a>(a: &'a [Advice], needle: &str) -> Option<&'a Advice> {
        a.iter().find(|x| x.setting.contains(needle))
    }

    #[test]
    fn doublewrite_goes_only_when_records_are_pages() {
        let mut f = facts();
        let a = rules(&f);
        assert_eq!(
            find(&a, "innodb_doublewrite = 0").unwrap().kind,
            Kind::MyCnf
        );
        f.data.recordsize = 131072;
        let a = rules(&f);
        assert_eq!(find(&a, "innodb_doublewrite = 1").unwrap().kind, Kind::Ok);
        assert!(find(&a, "recordsize=16K tank/db/data").is_some(), "{a:?}");
        f.server.doublewrite = false;
        let a = rules(&f);
        assert_eq!(
            find(&a, "innodb_doublewrite = 1").unwrap().kind,
            Kind::MyCnf
        );
    }

    #[test]
    fn big_buffer_pool_wants_metadata_only_cache() {
        let mut f = facts();
        assert!(find(&rules(&f), "primarycache=metadata").is_none());
        f.server.buffer_pool = 2 << 30;
        assert_eq!(
            find(&rules(&f), "primarycache=metadata").unwrap().kind,
            Kind::Dataset
        );
    }

    #[test]
    fn logs_on_the_data_dataset_are_flagged() {
        let mut f = facts();
        assert!(find(&rules(&f), "separate dataset").is_none());
        f.redo = Some(f.data.clone());
        f.binlog = None;
        let a = rules(&f);
        assert!(find(&a, "innodb_log_group_home_dir = <a separate").is_some());
        assert!(find(&a, "log_bin = ").is_some());
        let mut f = facts();
        f.redo.as_mut().unwrap().recordsize = 16384;
        assert!(find(&rules(&f), "recordsize=128K tank/db/log").is_some());
    }

    #[test]
    fn every_advice_has_a_reason() {
        for a in rules(&facts()) {
            assert!(!a.reason.is_empty() && !a.setting.is_empty(), "{a:?}");
        }
    }
}
