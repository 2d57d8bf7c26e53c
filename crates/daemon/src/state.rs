//! The daemon's persistent state in its home directory: `pools.json` (which pools it
//! owns, with their device paths and mounts) and `token` (the API secret).
//!
//! Invariants:
//! - `pools.json` is replaced atomically (write a temp file, fsync it, rename over,
//!   fsync the directory), so a crash leaves either the old or the new list.
//! - The token file is created 0600 with 32 random hex characters from /dev/urandom and
//!   never rewritten once it exists.

use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// One pool the daemon owns.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PoolRecord {
    pub name: String,
    pub devices: Vec<PathBuf>,
    /// Mounted datasets: (dataset, path). Kept for when mounting exists.
    #[serde(default)]
    pub mounts: Vec<(String, PathBuf)>,
}

/// Contents of `pools.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StateFile {
    #[serde(default = "one")]
    pub version: u32,
    #[serde(default)]
    pub pools: Vec<PoolRecord>,
}

fn one() -> u32 {
    1
}

pub const STATE_FILE: &str = "pools.json";
pub const TOKEN_FILE: &str = "token";

/// Read `home/pools.json`; a missing file is an empty state.
pub fn load(home: &Path) -> anyhow::Result<StateFile> {
    let path = home.join(STATE_FILE);
    match fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b)
            .map_err(|e| anyhow::anyhow!("{}: corrupt state file: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StateFile {
            version: 1,
            pools: vec![],
        }),
        Err(e) => Err(anyhow::anyhow!("{}: {e}", path.display())),
    }
}

/// Write `home/pools.json` atomically.
pub fn save(home: &Path, state: &StateFile) -> std::io::Result<()> {
    let data = serde_json::to_vec_pretty(state).map_err(std::io::Error::other)?;
    write_atomic(&home.join(STATE_FILE), &data, 0o600)
}

/// Replace `path` with `data` atomically and durably.
pub fn write_atomic(path: &Path, data: &[u8], mode: u32) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "state".into());
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let res = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    res
}

/// Read the API token, creating it (0600) if missing.
pub fn load_or_create_token(home: &Path) -> anyhow::Result<String> {
    let path = home.join(TOKEN_FILE);
    if let Ok(s) = fs::read_to_string(&path) {
        let t = s.trim().to_string();
        if t.len() >= 16 && t.chars().all(|c| c.is_ascii_hexdigit()) {
            return Ok(t);
        }
        anyhow::bail!(
            "{}: malformed token file (remove it to create a new one)",
            path.display()
        );
    }
    let mut raw = [0u8; 16];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut raw))
        .map_err(|e| anyhow::anyhow!("/dev/urandom: {e}"))?;
    let token = crate::pattern::to_hex(&raw);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    f.write_all(format!("{token}\n").as_bytes())?;
    f.sync_all()?;
    Ok(token)
}

/// Default ARC size (in `cachalot-arc`, so clients such as the mysql advisor need no
/// daemon code to know it).
pub use cachalot_arc::default_arc_max;

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("cachalot-state-test-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn state_roundtrip() {
        let d = tmpdir("state");
        assert_eq!(load(&d).unwrap().pools.len(), 0);
        let s = StateFile {
            version: 1,
            pools: vec![PoolRecord {
                name: "tank".into(),
                devices: vec!["/tmp/a".into()],
                mounts: vec![],
            }],
        };
        save(&d, &s).unwrap();
        assert_eq!(load(&d).unwrap(), s);
        fs::write(d.join(STATE_FILE), b"{nope").unwrap();
        assert!(load(&d).is_err());
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn token_created_once() {
        let d = tmpdir("token");
        let t = load_or_create_token(&d).unwrap();
        assert_eq!(t.len(), 32);
        assert_eq!(load_or_create_token(&d).unwrap(), t);
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(d.join(TOKEN_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        fs::remove_dir_all(&d).unwrap();
    }
}
