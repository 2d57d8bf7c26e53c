//! `cachalot bench nfs`: a user-space NFSv3 load generator over [`Client`].
//! Each target gets the same rows, measured in the same run, one after the
//! other: streaming write (1 MiB UNSTABLE writes, COMMIT at the end of each
//! file), streaming read (the files just written: from cache), 1-byte read
//! IOPS and 4 KiB random read IOPS (from cache), and 16 KiB random reads and
//! writes with a COMMIT after every 1 MiB written; with a cache-dropping
//! command, a streaming read from disk after the one from cache. All data written is
//! pseudo-random (incompressible). Every thread has its own
//! connection with one request outstanding, so `threads` is the number of
//! requests in flight.
//!
//! Invariants: every row runs for a fixed time (or a fixed amount of data for
//! the streaming rows) after its files exist; results are ratios against the
//! first target in the same run; the files made are removed afterwards.

use crate::client::{Client, Error};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One server to measure.
#[derive(Clone, Debug)]
pub struct Target {
    pub name: String,
    pub nfs: SocketAddr,
    /// MOUNT's address (the NFS port for cachalot; rpc.mountd's for others).
    pub mount: SocketAddr,
    pub export: String,
    /// The server's process, to report its CPU time per operation.
    pub pid: Option<u32>,
}

/// Parse `NAME=HOST:PORT[:MOUNTPORT]/EXPORT[@PID]`.
pub fn parse_target(s: &str) -> Result<Target, String> {
    let bad = || format!("--target '{s}': expected NAME=HOST:PORT[:MOUNTPORT]/EXPORT[@PID]");
    let (name, rest) = s.split_once('=').ok_or_else(bad)?;
    let (rest, pid) = match rest.rsplit_once('@') {
        Some((r, p)) => (r, Some(p.parse::<u32>().map_err(|_| bad())?)),
        None => (rest, None),
    };
    let (hostport, export) = rest.split_once('/').ok_or_else(bad)?;
    let parts: Vec<&str> = hostport.split(':').collect();
    let (host, port, mport) = match parts.as_slice() {
        [h, p] => (*h, *p, *p),
        [h, p, m] => (*h, *p, *m),
        _ => return Err(bad()),
    };
    let addr = |p: &str| {
        format!("{host}:{p}")
            .parse::<SocketAddr>()
            .map_err(|_| bad())
    };
    if name.is_empty() {
        return Err(bad());
    }
    Ok(Target {
        name: name.to_string(),
        nfs: addr(port)?,
        mount: addr(mport)?,
        export: format!("/{export}"),
        pid,
    })
}

/// How hard to push.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub threads: usize,
    /// Seconds per timed row.
    pub seconds: u64,
    /// Bytes written per thread by the streaming rows.
    pub stream_bytes: u64,
    /// Size of each thread's file for the random rows.
    pub file_bytes: u64,
    /// A shell command that empties the server's caches (run with `BENCH_TARGET`
    /// set to the target's name) before the streaming read from disk; without
    /// it that row is not measured.
    pub drop_caches: Option<String>,
}

/// One measured row of one target.
#[derive(Clone, Debug)]
pub struct RowResult {
    pub row: &'static str,
    pub unit: &'static str,
    pub value: f64,
    /// Server CPU seconds per operation, when its pid was given.
    pub cpu_us_per_op: Option<f64>,
}

pub const ROWS: &[(&str, &str)] = &[
    ("streaming write (1M, UNSTABLE + COMMIT)", "MB/s"),
    ("streaming read from cache (1M)", "MB/s"),
    ("streaming read from disk (1M)", "MB/s"),
    ("1-byte read IOPS from cache", "ops/s"),
    ("4 KiB random read IOPS from cache", "ops/s"),
    ("16 KiB random read IOPS", "ops/s"),
    ("16 KiB random write IOPS (COMMIT every 1 MiB)", "ops/s"),
];

/// One operation of a row on one connection: (continue?, bytes moved).
type Op<'a> = &'a (dyn Fn(&mut Conn, u64) -> Result<(bool, u64), String> + Sync);
/// (operations, bytes, seconds) and the server's CPU ticks before and after.
type Measured = ((u64, u64, f64), Option<(u64, u64)>);

fn err(e: Error) -> String {
    format!("{e:?}")
}

fn cpu_ticks(pid: Option<u32>) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?;
    let rest = stat.rsplit_once(") ")?.1;
    let f: Vec<&str> = rest.split(' ').collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

struct Conn {
    c: Client,
    root: Vec<u8>,
    file: Vec<u8>,
}

fn connect(t: &Target, i: usize) -> Result<Conn, String> {
    let mut m = Client::connect(t.mount).map_err(|e| e.to_string())?;
    let root = m.mount(&t.export).map_err(err)?;
    let mut c = Client::connect(t.nfs).map_err(|e| e.to_string())?;
    let name = format!("cachalot-bench-nfs-{i}");
    let _ = c.remove(&root, &name);
    let (file, _) = c.create_file(&root, &name, 0o644).map_err(err)?;
    Ok(Conn { c, root, file })
}

/// Run `op` on every connection in parallel for `secs` (or until it returns
/// false); returns (operations, bytes, elapsed seconds).
fn timed(
    conns: &mut [Conn],
    secs: u64,
    op: impl Fn(&mut Conn, u64) -> Result<(bool, u64), String> + Sync,
) -> Result<(u64, u64, f64), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let ops = AtomicU64::new(0);
    let bytes = AtomicU64::new(0);
    let start = Instant::now();
    let deadline = start + Duration::from_secs(secs);
    let res: Result<(), String> = std::thread::scope(|s| {
        let hs: Vec<_> = conns
            .iter_mut()
            .map(|conn| {
                let (stop, ops, bytes, op) = (&stop, &ops, &bytes, &op);
                s.spawn(move || -> Result<(), String> {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        let (more, b) = op(conn, i)?;
                        ops.fetch_add(1, Ordering::Relaxed);
                        bytes.fetch_add(b, Ordering::Relaxed);
                        i += 1;
                        if !more {
                            break;
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        let mut r = Ok(());
        for h in hs {
            if let Ok(Err(e)) | Err(e) = h.join().map_err(|_| "a load thread panicked".to_string())
            {
                stop.store(true, Ordering::Relaxed);
                r = Err(e);
            }
        }
        r
    });
    res?;
    Ok((
        ops.into_inner(),
        bytes.into_inner(),
        start.elapsed().as_secs_f64(),
    ))
}

fn rand(seed: u64, i: u64) -> u64 {
    let mut x = seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^ (x >> 33)
}

/// `len` pseudo-random (incompressible) bytes.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    (0..len.div_ceil(8) as u64)
        .flat_map(|i| rand(seed, i).to_le_bytes())
        .take(len)
        .collect()
}

/// Measure every row against one target.
pub fn run_target(t: &Target, o: &LoadOptions) -> Result<Vec<RowResult>, String> {
    let mut conns = (0..o.threads)
        .map(|i| connect(t, i))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = vec![];
    // Incompressible data: a server that compresses (cachalot's default lz4)
    // must not win the streaming rows, least of all the read from disk, by
    // moving fewer bytes than an uncompressed file system.
    let chunk = noise(1, 1 << 20);
    let mut row = |idx: usize, r: (u64, u64, f64), conns_pid: Option<(u64, u64)>| {
        let (name, unit) = ROWS[idx];
        let value = if unit == "MB/s" {
            r.1 as f64 / r.2 / 1e6
        } else {
            r.0 as f64 / r.2
        };
        let cpu = conns_pid.map(|(a, b)| {
            let hz = 100.0;
            (b.saturating_sub(a)) as f64 / hz / r.0.max(1) as f64 * 1e6
        });
        out.push(RowResult {
            row: name,
            unit,
            value,
            cpu_us_per_op: cpu,
        });
    };
    let measure = |conns: &mut [Conn], secs: u64, op: Op<'_>| -> Result<Measured, String> {
        let before = cpu_ticks(t.pid);
        let r = timed(conns, secs, op)?;
        let after = cpu_ticks(t.pid);
        Ok((r, before.zip(after)))
    };
    let stream_chunks = o.stream_bytes.div_ceil(1 << 20);
    let (r, cpu) = measure(&mut conns, 3600, &|c, i| {
        c.c.write(&c.file, i << 20, &chunk, 0).map_err(err)?;
        let last = i + 1 >= stream_chunks;
        if last {
            c.c.commit(&c.file).map_err(err)?;
        }
        Ok((!last, 1 << 20))
    })?;
    row(0, r, cpu);
    let stream_read = |c: &mut Conn, i: u64| {
        let (d, eof) = c.c.read(&c.file, i << 20, 1 << 20).map_err(err)?;
        Ok((!eof && i + 1 < stream_chunks, d.len() as u64))
    };
    let (r, cpu) = measure(&mut conns, 3600, &stream_read)?;
    row(1, r, cpu);
    if let Some(cmd) = &o.drop_caches {
        drop_caches(cmd, &t.name)?;
        let (r, cpu) = measure(&mut conns, 3600, &stream_read)?;
        row(2, r, cpu);
    }
    // The random rows use the first `file_bytes` of each file.
    let span = o.file_bytes.min(stream_chunks << 20).max(1 << 20);
    let (r, cpu) = measure(&mut conns, o.seconds, &|c, i| {
        let off = rand(1, i) % span;
        let (d, _) = c.c.read(&c.file, off, 1).map_err(err)?;
        Ok((true, d.len() as u64))
    })?;
    row(3, r, cpu);
    let (r, cpu) = measure(&mut conns, o.seconds, &|c, i| {
        let off = (rand(2, i) % (span / 4096)) * 4096;
        let (d, _) = c.c.read(&c.file, off, 4096).map_err(err)?;
        Ok((true, d.len() as u64))
    })?;
    row(4, r, cpu);
    let (r, cpu) = measure(&mut conns, o.seconds, &|c, i| {
        let off = (rand(3, i) % (span / 16384)) * 16384;
        let (d, _) = c.c.read(&c.file, off, 16384).map_err(err)?;
        Ok((true, d.len() as u64))
    })?;
    row(5, r, cpu);
    let page = noise(2, 16384);
    let (r, cpu) = measure(&mut conns, o.seconds, &|c, i| {
        let off = (rand(4, i) % (span / 16384)) * 16384;
        c.c.write(&c.file, off, &page, 0).map_err(err)?;
        if (i + 1) % 64 == 0 {
            c.c.commit(&c.file).map_err(err)?;
        }
        Ok((true, 16384))
    })?;
    row(6, r, cpu);
    for (i, c) in conns.iter_mut().enumerate() {
        let root = c.root.clone();
        let _ = c.c.remove(&root, &format!("cachalot-bench-nfs-{i}"));
    }
    Ok(out)
}

/// Run the cache-dropping command for target `name`.
fn drop_caches(cmd: &str, name: &str) -> Result<(), String> {
    let st = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .env("BENCH_TARGET", name)
        .status()
        .map_err(|e| format!("--drop-caches: {e}"))?;
    if !st.success() {
        return Err(format!("--drop-caches for {name} failed ({st})"));
    }
    Ok(())
}

/// Measure every target and format the table (ratios against the first).
pub fn run(targets: &[Target], o: &LoadOptions) -> Result<String, String> {
    let mut all = vec![];
    for t in targets {
        let r = run_target(t, o).map_err(|e| format!("{}: {e}", t.name))?;
        all.push(r);
    }
    let mut s = format!(
        "NFSv3 load: {} connections, one request each in flight, {} s per timed row\n\n| row | unit |",
        o.threads, o.seconds
    );
    for t in targets {
        s.push_str(&format!(" {} |", t.name));
    }
    for t in targets.iter().skip(1) {
        s.push_str(&format!(" {} / {} |", t.name, targets[0].name));
    }
    s.push('\n');
    s.push_str(&"|---".repeat(2 + 2 * targets.len() - 1));
    s.push_str("|\n");
    for (name, unit) in ROWS {
        let of = |r: &[RowResult]| r.iter().find(|v| v.row == *name).cloned();
        if all.iter().all(|r| of(r).is_none()) {
            continue;
        }
        s.push_str(&format!("| {name} | {unit} |"));
        for r in &all {
            match of(r) {
                Some(RowResult {
                    value,
                    cpu_us_per_op: Some(c),
                    ..
                }) => s.push_str(&format!(" {value:.0} ({c:.0} us CPU/op) |")),
                Some(v) => s.push_str(&format!(" {:.0} |", v.value)),
                None => s.push_str(" - |"),
            }
        }
        let base = of(&all[0]).map(|v| v.value.max(1e-9));
        for r in all.iter().skip(1) {
            match (base, of(r)) {
                (Some(b), Some(v)) => s.push_str(&format!(" {:.2}x |", v.value / b)),
                _ => s.push_str(" - |"),
            }
        }
        s.push('\n');
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse() {
        let t = parse_target("c=127.0.0.1:2049/tank/fs@42").unwrap();
        assert_eq!(
            (t.nfs.port(), t.mount.port(), t.export.as_str(), t.pid),
            (2049, 2049, "/tank/fs", Some(42))
        );
        let g = parse_target("g=127.0.0.1:20:21/srv/export").unwrap();
        assert_eq!((g.nfs.port(), g.mount.port(), g.pid), (20, 21, None));
        for bad in [
            "x",
            "=1.2.3.4:1/a",
            "n=host/a",
            "n=1.2.3.4:1",
            "n=1.2.3.4:1/a@x",
        ] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }
}
