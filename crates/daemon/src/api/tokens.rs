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
//!
//! The first token from the browser (`POST /api/v1/tokens/first`, see
//! `setup_routes`): a new appliance has no named token, and an HTTP caller cannot
//! mint one, so a browser-only user would need the CLI once. Instead, when the
//! daemon starts with no named token it writes a random one-time setup code to
//! `HOME/setup-code` (0600, root only, like `HOME/token`) and logs the file's
//! path (never the code). Whoever can read that file could already read
//! `HOME/token`, so exchanging the code for a named token gives no one more than
//! they had; the code is 128 random bits, compared by hash in constant time, and
//! wrong guesses are slowed to one a second. The code works once: any named
//! token (from the code or from `token create`) removes it and its file. It is
//! made again whenever no named token is left: at a start with none, and when
//! `token revoke` removes the last one (so root on the appliance can give a
//! browser-only user who lost their token a new code without a restart).
//!
//! Invariants of the setup code:
//! - It exists only while no named token does. The code's check and the token it
//!   makes are one step under the write lock, so a `token create` racing it cannot
//!   slip in between (the code never makes a token after another one exists).
//! - Failing to write it (a read-only home, no /dev/urandom) costs only the
//!   browser's first run: the daemon logs a warning and starts, and `token create`
//!   on the root-only unix socket still works.
//! - Over HTTP (unauthenticated) the file is named relative to the daemon's home,
//!   never by its absolute path; the daemon's log (root) names the path.

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
/// The one-time setup code's file (only while no named token exists).
pub const SETUP_CODE_FILE: &str = "setup-code";
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
    /// Hex BLAKE3 of the one-time setup code, while no named token exists.
    setup: Mutex<Option<String>>,
}

/// Why the first token was refused: an error code of the API and a message.
pub type FirstRefusal = (&'static str, String);

fn random_hex(n: usize) -> Result<String, String> {
    let mut raw = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut raw))
        .map_err(|e| format!("/dev/urandom: {e}"))?;
    Ok(crate::pattern::to_hex(&raw))
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
        let t = Tokens {
            path,
            default_token,
            entries: RwLock::new(file.tokens),
            write: Mutex::new(()),
            setup: Mutex::new(None),
        };
        if t.entries.read().is_empty() {
            t.offer_setup_code();
        } else {
            t.drop_setup_code();
        }
        Ok(t)
    }

    fn setup_code_path(&self) -> PathBuf {
        self.path.with_file_name(SETUP_CODE_FILE)
    }

    /// Write a new one-time setup code to `HOME/setup-code` (0600); only its
    /// hash stays in memory, and only the file's path is logged.
    fn make_setup_code(&self) -> Result<(), String> {
        let code = random_hex(16)?;
        let path = self.setup_code_path();
        crate::state::write_atomic(&path, format!("{code}\n").as_bytes(), 0o600)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        *self.setup.lock() = Some(hash(&code));
        eprintln!(
            "cachalot: no API token yet: the web UI's manage page asks for the one-time setup code in {} (root only) to create the first one",
            path.display()
        );
        Ok(())
    }

    /// Make the setup code, as no named token exists; a failure is only logged
    /// (the unix socket's `token create` still works, see the module doc).
    fn offer_setup_code(&self) {
        if let Err(e) = self.make_setup_code() {
            eprintln!(
                "cachalot: warning: no setup code for the first API token ({e}); create one with `cachalot token create NAME` on the appliance"
            );
        }
    }

    /// Forget the setup code and remove its file (a named token exists).
    fn drop_setup_code(&self) {
        *self.setup.lock() = None;
        let _ = std::fs::remove_file(self.setup_code_path());
    }

    /// Whether the first token can be made with the setup code now.
    pub fn setup_code_ready(&self) -> bool {
        self.setup.lock().is_some()
    }

    /// Exchange the one-time setup code for the first named token `name`;
    /// returns its secret. Refused (nothing created) once any named token
    /// exists, for a bad name, or for a wrong code. The caller slows down
    /// wrong guesses (see `setup_routes`).
    pub fn first(&self, code: &str, name: &str) -> Result<String, FirstRefusal> {
        self.add(name, || {
            let Some(want) = self.setup.lock().clone() else {
                return Err((
                    "already_exists",
                    "the first API token exists already: create more with `cachalot token create NAME`"
                        .into(),
                ));
            };
            if !ct_eq(hash(code.trim()).as_bytes(), want.as_bytes()) {
                return Err((
                    "forbidden",
                    format!(
                        "wrong setup code: it is in the file {SETUP_CODE_FILE} in the daemon's home on the appliance (root only)"
                    ),
                ));
            }
            Ok(())
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
        self.add(name, || Ok(())).map_err(|(_, m)| m)
    }

    /// Create token `name` if `allowed` agrees; it runs under the write lock,
    /// so what it checks still holds when the token is made.
    fn add(
        &self,
        name: &str,
        allowed: impl FnOnce() -> Result<(), FirstRefusal>,
    ) -> Result<String, FirstRefusal> {
        validate_token_name(name).map_err(|e| ("invalid_request", e))?;
        if name == DEFAULT_NAME {
            return Err((
                "already_exists",
                format!("token '{DEFAULT_NAME}' already exists (it is the daemon's token file)"),
            ));
        }
        let _w = self.write.lock();
        allowed()?;
        let mut list = self.entries.read().clone();
        if list.iter().any(|t| t.name == name) {
            return Err(("already_exists", format!("token '{name}' already exists")));
        }
        let secret = random_hex(32).map_err(|e| ("failed", e))?;
        list.push(TokenEntry {
            name: name.to_string(),
            blake3: hash(&secret),
            created: now_secs(),
        });
        self.save(&list).map_err(|e| ("failed", e))?;
        *self.entries.write() = list;
        self.drop_setup_code();
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
        let none_left = list.is_empty();
        *self.entries.write() = list;
        if none_left {
            self.offer_setup_code();
        }
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

    #[test]
    fn setup_code_gives_the_first_token_once() {
        use std::os::unix::fs::PermissionsExt;
        let d = std::env::temp_dir().join(format!("cachalot-setup-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let t = Tokens::open(&d, "0123456789abcdef0123".into()).unwrap();
        let file = d.join(SETUP_CODE_FILE);
        assert!(t.setup_code_ready());
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let code = std::fs::read_to_string(&file).unwrap().trim().to_string();
        assert_eq!(code.len(), 32);
        let (c, m) = t.first("0".repeat(32).as_str(), "admin").unwrap_err();
        assert_eq!(c, "forbidden", "{m}");
        assert!(!m.contains(&code), "{m}");
        assert_eq!(t.first(&code, "bad name").unwrap_err().0, "invalid_request");
        assert_eq!(t.list().as_array().unwrap().len(), 1, "nothing created");
        let s = t.first(&code, "admin").unwrap();
        assert_eq!(t.check(&s).as_deref(), Some("admin"));
        assert!(!file.exists() && !t.setup_code_ready());
        assert_eq!(t.first(&code, "again").unwrap_err().0, "already_exists");
        // A start with a named token makes no code.
        let t2 = Tokens::open(&d, "x".repeat(20)).unwrap();
        assert!(!t2.setup_code_ready() && !file.exists());
        // `token create` also ends the code's use.
        t.revoke("admin").unwrap();
        let t3 = Tokens::open(&d, "x".repeat(20)).unwrap();
        let code = std::fs::read_to_string(&file).unwrap().trim().to_string();
        t3.create("cli").unwrap();
        assert!(!file.exists());
        assert_eq!(t3.first(&code, "ui").unwrap_err().0, "already_exists");
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn temp_home(what: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cachalot-{what}-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(t: &Tokens) -> Vec<String> {
        let rows = t.list();
        let rows = rows.as_array().unwrap();
        rows.iter()
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// A setup code that cannot be written does not stop the daemon: the
    /// registry opens without one and `token create` works (before, `open`
    /// failed and the daemon did not start).
    #[test]
    fn unwritable_setup_code_still_opens() {
        let d = temp_home("setup-unwritable");
        // A directory in the file's place: the atomic rename onto it fails
        // (as a read-only home would; root ignores a read-only mode bit).
        std::fs::create_dir_all(d.join(SETUP_CODE_FILE).join("x")).unwrap();
        let t = Tokens::open(&d, "0123456789abcdef0123".into()).unwrap();
        assert_eq!(
            t.first("0".repeat(32).as_str(), "ui").unwrap_err().0,
            "already_exists"
        );
        t.create("cli").unwrap();
        assert_eq!(names(&t), ["default", "cli"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Revoking the last named token makes a new setup code at once (before,
    /// only a restart did), and it makes the next first token; revoking a
    /// token while another is left makes none.
    #[test]
    fn revoking_the_last_token_makes_a_new_code() {
        use std::os::unix::fs::PermissionsExt;
        let d = temp_home("setup-revoke");
        let file = d.join(SETUP_CODE_FILE);
        let t = Tokens::open(&d, "0123456789abcdef0123".into()).unwrap();
        let old = std::fs::read_to_string(&file).unwrap();
        t.first(&old, "ui").unwrap();
        t.create("cli").unwrap();
        t.revoke("ui").unwrap();
        assert!(!file.exists(), "a named token is left: no code");
        t.revoke("cli").unwrap();
        let code = std::fs::read_to_string(&file).expect("a new setup code");
        assert_ne!(code, old);
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            t.first(&old, "ui2").unwrap_err().0,
            "forbidden",
            "the old code is dead"
        );
        t.first(&code, "ui2").unwrap();
        assert_eq!(names(&t), ["default", "ui2"]);
        assert!(!file.exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// The code is checked and the token made in one step: a `token create`
    /// racing the first token never lets the code make a token after another
    /// named token exists (before, the code's check passed, the CLI's token was
    /// made, then the code's: two tokens, the code's second).
    #[test]
    fn first_token_racing_token_create_never_follows_it() {
        use std::sync::{Arc, Barrier};
        let d = temp_home("setup-race");
        for _ in 0..20 {
            let _ = std::fs::remove_file(d.join(TOKENS_FILE));
            let t = Arc::new(Tokens::open(&d, "0123456789abcdef0123".into()).unwrap());
            let code = std::fs::read_to_string(d.join(SETUP_CODE_FILE)).unwrap();
            let go = Arc::new(Barrier::new(2));
            let (t1, go1) = (t.clone(), go.clone());
            let ui = std::thread::spawn(move || {
                go1.wait();
                t1.first(&code, "ui")
            });
            let (t2, go2) = (t.clone(), go.clone());
            let cli = std::thread::spawn(move || {
                go2.wait();
                t2.create("cli")
            });
            let (ui, cli) = (ui.join().unwrap(), cli.join().unwrap());
            cli.unwrap();
            match ui {
                Ok(_) => assert_eq!(
                    names(&t),
                    ["default", "ui", "cli"],
                    "the code made a second token"
                ),
                Err((code, m)) => {
                    assert_eq!(code, "already_exists", "{m}");
                    assert_eq!(names(&t), ["default", "cli"]);
                }
            }
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
}
