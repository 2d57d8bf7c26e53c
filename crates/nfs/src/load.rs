//! `cachalot bench nfs`: a user-space NFS load generator, NFSv3 over
//! [`Client`] or NFSv4.1 over [`Session4`] (a target's `?version=4.1`: one
//! session per connection, each operation a COMPOUND of SEQUENCE, PUTFH and
//! the operation, I/O under an open stateid). Each target gets the same rows, measured in the same run, one after the
//! other: streaming write (1 MiB UNSTABLE writes, COMMIT at the end of each
//! file), streaming read (the files just written: from cache), 1-byte read
//! IOPS and 4 KiB random read IOPS (from cache), and 16 KiB random reads and
//! writes with a COMMIT after every 1 MiB written, and GETATTR IOPS (the
//! metadata row: over v4.1 the attributes the Linux client asks for); with a cache-dropping
//! command, a streaming read from disk after the one from cache. All data written is
//! pseudo-random (incompressible). Every thread has its own
//! connection with one request outstanding, so `threads` is the number of
//! requests in flight.
//!
//! Invariants: every row runs for a fixed time (or a fixed amount of data for
//! the streaming rows) after its files exist; results are ratios against the
//! first target in the same run; the files made are removed afterwards.

use crate::client::{Client, Error};
use crate::nfs4::client::{Session4, Stateid};
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
    /// Speak NFSv4.1 (the export is then a path in the server's pseudo file
    /// system, and MOUNT is not used).
    pub v41: bool,
}

/// Parse `NAME=HOST:PORT[:MOUNTPORT]/EXPORT[@PID][?version=3|4.1]`.
pub fn parse_target(s: &str) -> Result<Target, String> {
    let bad = || {
        format!("--target '{s}': expected NAME=HOST:PORT[:MOUNTPORT]/EXPORT[@PID][?version=3|4.1]")
    };
    let (s, v41) = match s.rsplit_once("?version=") {
        Some((s, "4.1")) => (s, true),
        Some((s, "3")) => (s, false),
        Some(_) => return Err(bad()),
        None => (s, false),
    };
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
        v41,
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
    ("GETATTR IOPS (metadata)", "ops/s"),
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

/// One connection with its file, over either version.
enum Conn {
    V3 {
        c: Client,
        root: Vec<u8>,
        file: Vec<u8>,
    },
    V41 {
        s: Box<Session4>,
        root: Vec<u8>,
        file: Vec<u8>,
        sid: Stateid,
    },
}

fn file_name(i: usize) -> String {
    format!("cachalot-bench-nfs-{i}")
}

fn connect(t: &Target, i: usize) -> Result<Conn, String> {
    let name = file_name(i);
    let c = Client::connect(t.nfs).map_err(|e| e.to_string())?;
    if t.v41 {
        // A client owner of its own per connection: each connection is a
        // client with one session, as `threads` kernel clients would be.
        let owner = format!("cachalot-bench-{}-{i}", std::process::id());
        let mut s = Session4::establish(c, owner.as_bytes(), 1).map_err(err)?;
        s.reclaim_complete().map_err(err)?;
        let root = s.lookup_path(&t.export).map_err(err)?;
        let _ = s.remove(&root, &name);
        let (sid, file) = s.open_create(&root, b"bench", &name, 0o644).map_err(err)?;
        return Ok(Conn::V41 {
            s: Box::new(s),
            root,
            file,
            sid,
        });
    }
    let mut c = c;
    let mut m = Client::connect(t.mount).map_err(|e| e.to_string())?;
    let root = m.mount(&t.export).map_err(err)?;
    let _ = c.remove(&root, &name);
    let (file, _) = c.create_file(&root, &name, 0o644).map_err(err)?;
    Ok(Conn::V3 { c, root, file })
}

impl Conn {
    /// An UNSTABLE write of `data` at `off`.
    fn write(&mut self, off: u64, data: &[u8]) -> Result<(), String> {
        match self {
            Conn::V3 { c, file, .. } => c.write(file, off, data, 0).map(|_| ()),
            Conn::V41 { s, file, sid, .. } => s.write(file, *sid, off, data, 0).map(|_| ()),
        }
        .map_err(err)
    }

    /// Read `count` bytes at `off`: (bytes read, eof).
    fn read(&mut self, off: u64, count: u32) -> Result<(u64, bool), String> {
        let (d, eof) = match self {
            Conn::V3 { c, file, .. } => c.read(file, off, count),
            Conn::V41 { s, file, sid, .. } => s.read(file, *sid, off, count),
        }
        .map_err(err)?;
        Ok((d.len() as u64, eof))
    }

    /// GETATTR of the file (over v4.1 with the attributes the Linux client
    /// asks for; v3's fattr3 is fixed).
    fn getattr(&mut self) -> Result<(), String> {
        match self {
            Conn::V3 { c, file, .. } => c.getattr(file).map(|_| ()),
            Conn::V41 { s, file, .. } => s.getattr(file).map(|_| ()),
        }
        .map_err(err)
    }

    fn commit(&mut self) -> Result<(), String> {
        match self {
            Conn::V3 { c, file, .. } => c.commit(file).map(|_| ()),
            Conn::V41 { s, file, .. } => s.commit(file).map(|_| ()),
        }
        .map_err(err)
    }

    /// Close and remove the file `name` (best effort: the rows are measured).
    fn remove(&mut self, name: &str) {
        match self {
            Conn::V3 { c, root, .. } => {
                let _ = c.remove(root, name);
            }
            Conn::V41 { s, root, file, sid } => {
                let _ = s.close(file, *sid);
                let _ = s.remove(root, name);
            }
        }
    }
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
        c.write(i << 20, &chunk)?;
        let last = i + 1 >= stream_chunks;
        if last {
            c.commit()?;
        }
        Ok((!last, 1 << 20))
    })?;
    row(0, r, cpu);
    let stream_read = |c: &mut Conn, i: u64| {
        let (n, eof) = c.read(i << 20, 1 << 20)?;
        Ok((!eof && i + 1 < stream_chunks, n))
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
        Ok((true, c.read(off, 1)?.0))
    })?;
    row(3, r, cpu);
    let (r, cpu) = measure(&mut conns, o.seconds, &|c, i| {
        let off = (rand(2, i) % (span / 4096)) * 4096;
        Ok((true, c.read(off, 4096)?.0))
    })?;
    row(4, r, cpu);
    let (r, cpu) = measure(&mut conns, o.seconds, &|c, i| {
        let off = (rand(3, i) % (span / 16384)) * 16384;
        Ok((true, c.read(off, 16384)?.0))
    })?;
    row(5, r, cpu);
    let page = noise(2, 16384);
    let (r, cpu) = measure(&mut conns, o.seconds, &|c, i| {
        let off = (rand(4, i) % (span / 16384)) * 16384;
        c.write(off, &page)?;
        if (i + 1) % 64 == 0 {
            c.commit()?;
        }
        Ok((true, 16384))
    })?;
    row(6, r, cpu);
    // Metadata: one GETATTR per request, the smallest COMPOUND after
    // SEQUENCE and PUTFH, so the per-COMPOUND cost shows most here.
    let (r, cpu) = measure(&mut conns, o.seconds, &|c, _| {
        c.getattr()?;
        Ok((true, 0))
    })?;
    row(7, r, cpu);
    for (i, c) in conns.iter_mut().enumerate() {
        c.remove(&file_name(i));
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
        "NFS load: {} connections, one request each in flight, {} s per timed row\n\n| row | unit |",
        o.threads, o.seconds
    );
    for t in targets {
        let vers = if t.v41 { "v4.1" } else { "v3" };
        s.push_str(&format!(" {} ({vers}) |", t.name));
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
        assert!(!t.v41 && !g.v41);
        let v = parse_target("v=127.0.0.1:2049/tank/fs@7?version=4.1").unwrap();
        assert_eq!(
            (v.export.as_str(), v.pid, v.v41),
            ("/tank/fs", Some(7), true)
        );
        assert!(!parse_target("v=127.0.0.1:2049/a?version=3").unwrap().v41);
        for bad in [
            "x",
            "=1.2.3.4:1/a",
            "n=host/a",
            "n=1.2.3.4:1",
            "n=1.2.3.4:1/a@x",
            "n=1.2.3.4:1/a?version=4",
        ] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }
}
