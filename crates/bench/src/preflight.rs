//! Checks made before a study starts anything: required programs, free space on
//! targets and baselines, TCP ports and unix sockets for the servers, the sysbench
//! test name.
//!
//! Invariants: these functions change nothing on the machine (a port is bound and
//! released at once to test it); each error is one line naming the value at fault.

use crate::exec::{self, Mode};
use crate::lab::LabOptions;
use crate::spec::{format_size, BaselineSpec};
use crate::tools::Tools;
use anyhow::{anyhow, bail, Context, Result};
use std::net::TcpListener;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The programs a study needs: `base` plus what its baselines need.
pub fn programs(base: &[&'static str], baselines: &[BaselineSpec]) -> Vec<&'static str> {
    let mut progs = base.to_vec();
    if !baselines.is_empty() {
        progs.extend(["losetup", "mount", "umount"]);
        for b in baselines {
            if !progs.contains(&b.fs.mkfs()) {
                progs.push(b.fs.mkfs());
            }
        }
    }
    progs
}

/// Refuse targets with less than `need` bytes free, and baselines too small for
/// it (`what` names the data, for the message).
pub fn check_space(lab: &LabOptions, need: u64, what: &str) -> Result<()> {
    for t in &lab.targets {
        if let Ok(free) = crate::fsinfo::free_bytes(&t.path) {
            if free < need {
                bail!(
                    "target '{}': {} has {} free; {what} needs about {}",
                    t.name,
                    t.path.display(),
                    format_size(free),
                    format_size(need)
                );
            }
        }
    }
    for b in &lab.baselines {
        if b.size * 9 / 10 < need {
            bail!(
                "baseline '{}' ({}) is too small: {what} needs about {} (give a larger SIZE)",
                b.name,
                format_size(b.size),
                format_size(need)
            );
        }
    }
    Ok(())
}

const MAX_SOCKET_PATH: usize = 100;

/// Ports for `n` servers: `base`, `base+1`, ... (each checked free), or free
/// ports chosen by the kernel.
pub fn pick_ports(n: usize, base: Option<u16>) -> Result<Vec<u16>> {
    match base {
        Some(b) => (0..n)
            .map(|i| {
                let p = u16::try_from(b as usize + i)
                    .map_err(|_| anyhow!("--port {b}: port numbers run past 65535"))?;
                TcpListener::bind(("127.0.0.1", p)).map_err(|e| {
                    anyhow!("port {p} on 127.0.0.1 is in use ({e}); choose another --port")
                })?;
                Ok(p)
            })
            .collect(),
        None => {
            let ls: Vec<TcpListener> = (0..n)
                .map(|_| {
                    TcpListener::bind(("127.0.0.1", 0))
                        .context("cannot find a free port on 127.0.0.1")
                })
                .collect::<Result<_>>()?;
            ls.iter().map(|l| Ok(l.local_addr()?.port())).collect()
        }
    }
}

/// Socket paths for the servers in `dir`; an existing file there is refused.
pub fn socket_paths(names: &[String], dir: &Path) -> Result<Vec<PathBuf>> {
    names
        .iter()
        .map(|n| {
            let p = dir.join(format!("mariadb-{n}.sock"));
            if p.as_os_str().len() > MAX_SOCKET_PATH {
                bail!(
                    "socket path {} is too long for a unix socket (use a shorter --socket-dir)",
                    p.display()
                );
            }
            if p.symlink_metadata().is_ok() {
                if UnixStream::connect(&p).is_ok() {
                    bail!(
                        "socket {} is in use (a server is listening on it)",
                        p.display()
                    );
                }
                bail!(
                    "socket {} already exists (left over? remove it or use another --socket-dir)",
                    p.display()
                );
            }
            Ok(p)
        })
        .collect()
}

/// Fail early on a sysbench test name that does not exist.
pub fn check_workload(tools: &Tools, test: &str) -> Result<()> {
    if test.is_empty() || test.contains(['/', ' ']) && !Path::new(test).is_file() {
        bail!("unknown sysbench workload '{test}'");
    }
    let mut c = tools.cmd("sysbench");
    c.args([test, "help"]);
    let out = exec::run(
        &mut c,
        "sysbench help",
        Duration::from_secs(30),
        Mode::Interruptible,
    )?;
    if !out.status.success()
        || out.stdout.contains("Cannot find")
        || out.stderr.contains("Cannot find")
    {
        bail!("unknown sysbench workload '{test}' (e.g. oltp_read_write, oltp_read_only, oltp_write_only)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse_baseline;

    #[test]
    fn ports_in_use_are_refused() {
        let l = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let p = l.local_addr().unwrap().port();
        let e = pick_ports(1, Some(p)).unwrap_err().to_string();
        assert!(
            e.contains(&format!("port {p} on 127.0.0.1 is in use")),
            "{e}"
        );
        let free = pick_ports(3, None).unwrap();
        assert_eq!(free.len(), 3);
        assert!(pick_ports(2, Some(65535)).is_err());
    }

    #[test]
    fn sockets_in_use_or_left_over_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let names = vec!["a".to_string(), "b".to_string()];
        let ok = socket_paths(&names, d.path()).unwrap();
        assert_eq!(ok[0], d.path().join("mariadb-a.sock"));
        let _l = std::os::unix::net::UnixListener::bind(&ok[1]).unwrap();
        let e = socket_paths(&names, d.path()).unwrap_err().to_string();
        assert!(e.contains("is in use"), "{e}");
        drop(_l);
        let e = socket_paths(&names, d.path()).unwrap_err().to_string();
        assert!(e.contains("already exists"), "{e}");
    }

    #[test]
    fn baselines_bring_their_programs() {
        let b = vec![
            parse_baseline("xfs").unwrap(),
            parse_baseline("x2=xfs:1G").unwrap(),
        ];
        assert_eq!(
            programs(&["fio"], &b),
            ["fio", "losetup", "mount", "umount", "mkfs.xfs"]
        );
        assert_eq!(programs(&["fio"], &[]), ["fio"]);
    }

    #[test]
    fn small_baselines_are_refused() {
        let lab = LabOptions {
            baselines: vec![parse_baseline("ext4:256M").unwrap()],
            ..LabOptions::default()
        };
        let e = check_space(&lab, 1 << 30, "the data")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("baseline 'ext4' (256M) is too small: the data needs about 1G"),
            "{e}"
        );
        assert!(check_space(&lab, 100 << 20, "x").is_ok());
    }
}
