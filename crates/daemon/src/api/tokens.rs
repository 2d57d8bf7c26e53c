//! Named API tokens: `token create NAME` (the secret is shown once), `token list`,
//! `token revoke NAME`. HTTP requests that change anything carry one as
//! `Authorization: Bearer SECRET`; the unix socket (root only) needs none.
//!
//! Invariants:
//! - Only a hash (BLAKE3) of each secret is stored, in `HOME/tokens.json` (0600,
//!   replaced atomically), so the file does not reveal usable secrets.
//! - A secret is never logged and never part of a URL: the daemon logs names only,
//!   and the HTTP side reads secrets from the `Authorization` header alone.
//! - Token management ops are served on the unix socket only (see
//!   [`UNIX_ONLY_OPS`]); an HTTP caller cannot mint or revoke tokens.
//! - The original `HOME/token` stays valid under the name `default` and cannot be
//!   revoked through the API (replace the file and restart instead).
//! - A revoked token stops working for the next request: checks read the live list.

use crate::daemon::{Daemon, OpResult};
use crate::proto::Args;
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Ops refused over HTTP whatever the token.
pub const UNIX_ONLY_OPS: &[&str] = &["token.create", "token.list", "token.revoke"];

pub const TOKENS_FILE: &str = "tokens.json";
/// Name under which `HOME/token` is listed and accepted.
pub const DEFAULT_NAME: &str = "default";

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
struct TokenEntry {
    name: String,
    /// Hex BLAKE3 of the secret.
    blake3: String,
    /// Unix seconds.
    created: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TokenFile {
    #[serde(default)]
    version: u32,
    #[serde(default)]
    tokens: Vec<TokenEntry>,
}

/// The token registry of one daemon.
pub struct Tokens {
    path: PathBuf,
    default_token: String,
    entries: RwLock<Vec<TokenEntry>>,
    /// Serialises create/revoke with their file writes.
    write: Mutex<()>,
}

fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn hash(secret: &str) -> String {
    blake3::hash(secret.as_bytes()).to_hex().to_string()
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Token names: 1 to 64 of letters, digits, `_-.`, starting with a letter or digit.
pub fn validate_token_name(n: &str) -> Result<(), String> {
    let ok = !n.is_empty()
        && n.len() <= 64
        && n.starts_with(|c: char| c.is_ascii_alphanumeric())
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid token name '{n}': 1 to 64 letters, digits, _ - . (starting with a letter or digit)"
        ))
    }
}

impl Tokens {
    /// Load `home/tokens.json` (missing: no named tokens).
    pub fn open(home: &Path, default_token: String) -> anyhow::Result<Tokens> {
        let path = home.join(TOKENS_FILE);
        let file: TokenFile = match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b)
                .map_err(|e| anyhow::anyhow!("{}: corrupt token file: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => TokenFile::default(),
            Err(e) => anyhow::bail!("{}: {e}", path.display()),
        };
        Ok(Tokens {
            path,
            default_token,
            entries: RwLock::new(file.tokens),
            write: Mutex::new(()),
        })
    }

    fn save(&self, entries: &[TokenEntry]) -> Result<(), String> {
        let f = TokenFile {
            version: 1,
            tokens: entries.to_vec(),
        };
        let data = serde_json::to_vec_pretty(&f).map_err(|e| e.to_string())?;
        crate::state::write_atomic(&self.path, &data, 0o600)
            .map_err(|e| format!("{}: {e}", self.path.display()))
    }

    /// Create token `name`; returns its secret (shown once, stored only hashed).
    pub fn create(&self, name: &str) -> Result<String, String> {
        validate_token_name(name)?;
        if name == DEFAULT_NAME {
            return Err(format!(
                "token '{DEFAULT_NAME}' already exists (it is the daemon's token file)"
            ));
        }
        let _w = self.write.lock();
        let mut list = self.entries.read().clone();
        if list.iter().any(|t| t.name == name) {
            return Err(format!("token '{name}' already exists"));
        }
        let mut raw = [0u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut raw))
            .map_err(|e| format!("/dev/urandom: {e}"))?;
        let secret = crate::pattern::to_hex(&raw);
        list.push(TokenEntry {
            name: name.to_string(),
            blake3: hash(&secret),
            created: now_secs(),
        });
        self.save(&list)?;
        *self.entries.write() = list;
        Ok(secret)
    }

    /// Revoke token `name`.
    pub fn revoke(&self, name: &str) -> Result<(), String> {
        validate_token_name(name)?;
        if name == DEFAULT_NAME {
            return Err(format!(
                "token '{DEFAULT_NAME}' is the daemon's token file: it cannot be revoked here (replace HOME/token and restart)"
            ));
        }
        let _w = self.write.lock();
        let mut list = self.entries.read().clone();
        let before = list.len();
        list.retain(|t| t.name != name);
        if list.len() == before {
            return Err(format!("token '{name}' does not exist"));
        }
        self.save(&list)?;
        *self.entries.write() = list;
        Ok(())
    }

    /// Names and creation times.
    pub fn list(&self) -> Value {
        let mut rows = vec![json!({"name": DEFAULT_NAME, "created": null})];
        rows.extend(
            self.entries
                .read()
                .iter()
                .map(|t| json!({"name": t.name, "created": t.created})),
        );
        Value::Array(rows)
    }

    /// The name of the token whose secret is `presented`, if any.
    pub fn check(&self, presented: &str) -> Option<String> {
        if ct_eq(presented.as_bytes(), self.default_token.as_bytes()) {
            return Some(DEFAULT_NAME.to_string());
        }
        // Compare hashes: equal-length values, and no timing hint about the secret.
        let h = hash(presented);
        self.entries
            .read()
            .iter()
            .find(|t| ct_eq(t.blake3.as_bytes(), h.as_bytes()))
            .map(|t| t.name.clone())
    }
}

impl Daemon {
    /// `token.create`, `token.list`, `token.revoke`.
    pub(crate) fn token_op(&self, op: &str, a: &Args) -> OpResult {
        let tokens = &self.api.tokens;
        match op {
            "token.create" => {
                let name = a.str("name")?;
                let secret = tokens.create(&name)?;
                eprintln!("cachalot: API token '{name}' created");
                Ok(json!({ "name": name, "token": secret }))
            }
            "token.revoke" => {
                let name = a.str("name")?;
                tokens.revoke(&name)?;
                eprintln!("cachalot: API token '{name}' revoked");
                Ok(json!({ "name": name }))
            }
            "token.list" => Ok(tokens.list()),
            other => Err(format!("unknown operation '{other}'")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_check_revoke_persist() {
        let d = std::env::temp_dir().join(format!("cachalot-tokens-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let t = Tokens::open(&d, "0123456789abcdef0123".into()).unwrap();
        assert_eq!(t.check("0123456789abcdef0123").as_deref(), Some("default"));
        let s = t.create("ci").unwrap();
        assert_eq!(s.len(), 64);
        assert_eq!(t.check(&s).as_deref(), Some("ci"));
        assert!(t.create("ci").unwrap_err().contains("already exists"));
        assert!(t.create("default").is_err());
        assert!(t.create("bad name").is_err());
        assert!(t.create("").is_err());
        assert!(t.check("nope").is_none());
        let raw = std::fs::read_to_string(d.join(TOKENS_FILE)).unwrap();
        assert!(!raw.contains(&s), "the secret is stored hashed only");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(d.join(TOKENS_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // A second registry on the same home sees it (persisted).
        let t2 = Tokens::open(&d, "x".repeat(20)).unwrap();
        assert_eq!(t2.check(&s).as_deref(), Some("ci"));
        t.revoke("ci").unwrap();
        assert!(t.check(&s).is_none());
        assert!(t.revoke("ci").unwrap_err().contains("does not exist"));
        assert!(t.revoke("default").is_err());
        let names: Vec<String> = t
            .list()
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, vec!["default"]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
