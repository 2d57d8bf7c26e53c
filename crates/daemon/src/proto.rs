//! The wire protocol shared by the unix socket and HTTP: one JSON request
//! `{"op": "...", "args": {...}}`, one JSON response `{"ok": true, "result": ...}` or
//! `{"ok": false, "error": "one-line message"}`.
//!
//! Invariants:
//! - Error messages are always a single line (newlines are replaced by "; ").
//! - [`Args`] validates every argument: unknown keys, missing keys and wrong types
//!   are errors naming the argument, never panics.

use serde_json::{Map, Value};

pub use cachalot_api_types::wire::{one_line, Request, Response};

/// Parse a request line; the error is suitable for a response.
pub fn parse_request(line: &str) -> Result<Request, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("malformed request: {e}"))?;
    let Value::Object(mut m) = v else {
        return Err("malformed request: expected a JSON object".to_string());
    };
    let op = match m.remove("op") {
        Some(Value::String(s)) => s,
        Some(_) => return Err("malformed request: 'op' must be a string".to_string()),
        None => return Err("malformed request: missing 'op'".to_string()),
    };
    let args = m.remove("args").unwrap_or(Value::Object(Map::new()));
    if let Some(k) = m.keys().next() {
        return Err(format!("malformed request: unknown field '{k}'"));
    }
    Ok(Request { op, args })
}

/// Typed, validating access to a request's arguments.
pub struct Args<'a> {
    op: &'a str,
    map: Map<String, Value>,
}

pub type ArgResult<T> = Result<T, String>;

impl<'a> Args<'a> {
    /// Check that `args` is an object (or null) whose keys are all in `allowed`.
    pub fn new(op: &'a str, args: &Value, allowed: &[&str]) -> ArgResult<Args<'a>> {
        let map = match args {
            Value::Null => Map::new(),
            Value::Object(m) => m.clone(),
            _ => return Err(format!("{op}: 'args' must be an object")),
        };
        for k in map.keys() {
            if !allowed.contains(&k.as_str()) {
                return Err(format!("{op}: unknown argument '{k}'"));
            }
        }
        Ok(Args { op, map })
    }

    fn get(&self, key: &str) -> Option<&Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn type_err(&self, key: &str, what: &str) -> String {
        format!("{}: argument '{key}' must be {what}", self.op)
    }

    pub fn str(&self, key: &str) -> ArgResult<String> {
        self.opt_str(key)?
            .ok_or_else(|| format!("{}: missing argument '{key}'", self.op))
    }

    pub fn opt_str(&self, key: &str) -> ArgResult<Option<String>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.type_err(key, "a string")),
        }
    }

    pub fn bool(&self, key: &str) -> ArgResult<bool> {
        match self.get(key) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(self.type_err(key, "true or false")),
        }
    }

    pub fn u64(&self, key: &str) -> ArgResult<u64> {
        self.opt_u64(key)?
            .ok_or_else(|| format!("{}: missing argument '{key}'", self.op))
    }

    pub fn opt_u64(&self, key: &str) -> ArgResult<Option<u64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.type_err(key, "a non-negative integer")),
        }
    }

    /// A size: a JSON integer, or a string such as "256M".
    pub fn opt_size(&self, key: &str) -> ArgResult<Option<u64>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => crate::size::parse_size(s)
                .map(Some)
                .map_err(|e| format!("{}: {key}: {e}", self.op)),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.type_err(key, "a size")),
        }
    }

    /// A list of strings; missing means empty.
    pub fn str_list(&self, key: &str) -> ArgResult<Vec<String>> {
        match self.get(key) {
            None => Ok(vec![]),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| self.type_err(key, "a list of strings")),
            Some(_) => Err(self.type_err(key, "a list of strings")),
        }
    }

    /// Properties: `{"k": "v"}`, `[["k","v"]]` or `["k=v"]`; missing means none.
    /// Order is kept for the list forms.
    pub fn props(&self, key: &str) -> ArgResult<Vec<(String, String)>> {
        let bad = || self.type_err(key, "properties ({\"k\": \"v\"} or [\"k=v\"])");
        let out: Vec<(String, String)> = match self.get(key) {
            None => vec![],
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    Value::Number(n) => Ok((k.clone(), n.to_string())),
                    _ => Err(bad()),
                })
                .collect::<Result<_, _>>()?,
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| match v {
                    Value::String(s) => s
                        .split_once('=')
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .ok_or_else(bad),
                    Value::Array(kv) => match kv.as_slice() {
                        [Value::String(k), Value::String(v)] => Ok((k.clone(), v.clone())),
                        _ => Err(bad()),
                    },
                    _ => Err(bad()),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(bad()),
        };
        for (k, _) in &out {
            validate_prop_name(k).map_err(|e| format!("{}: {e}", self.op))?;
        }
        Ok(out)
    }

    /// The raw value, for ops with structured arguments.
    pub fn value(&self, key: &str) -> Option<&Value> {
        self.get(key)
    }
}

/// Property names: lowercase letters, digits, `_`, `.`, `:` (user properties), 1..=256.
pub fn validate_prop_name(p: &str) -> Result<(), String> {
    // written@SNAP or written@FS@SNAP: bytes written since that snapshot (zfs's form).
    if let Some(snap) = p.strip_prefix("written@") {
        let ok = !snap.is_empty()
            && snap.len() <= 512
            && snap.chars().all(|c| {
                c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-' | '/' | '@')
            });
        return if ok {
            Ok(())
        } else {
            Err(format!("invalid property name '{p}'"))
        };
    }
    let ok = !p.is_empty()
        && p.len() <= 256
        && p.chars().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.' | ':' | '-')
        });
    if ok {
        Ok(())
    } else {
        Err(format!("invalid property name '{p}'"))
    }
}

/// Names that cannot be pool names because they are vdev keywords.
const RESERVED_POOL_NAMES: &[&str] = &[
    "mirror", "raidz", "raidz1", "raidz2", "raidz3", "draid", "spare", "log", "cache", "special",
    "dedup",
];

fn name_component_ok(c: &str) -> bool {
    !c.is_empty()
        && c.len() <= 255
        && c != "."
        && c != ".."
        && c.chars()
            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '-' | '.' | ':'))
}

/// Pool names: start with a letter, then letters, digits, `_-.:`; not a vdev keyword.
pub fn validate_pool_name(n: &str) -> Result<(), String> {
    if !name_component_ok(n) || !n.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(format!(
            "invalid pool name '{n}': must start with a letter and contain only letters, digits and _-.:"
        ));
    }
    if RESERVED_POOL_NAMES.contains(&n) {
        return Err(format!("invalid pool name '{n}': name is reserved"));
    }
    Ok(())
}

/// Dataset names: `pool/comp/comp`, each component valid, at most 255 bytes in all.
pub fn validate_dataset_name(n: &str) -> Result<(), String> {
    if n.len() > 255 {
        return Err(format!("invalid dataset name '{n}': longer than 255 bytes"));
    }
    if n.contains('@') {
        return Err(format!(
            "invalid dataset name '{n}': snapshots are not supported here"
        ));
    }
    let mut comps = n.split('/');
    let pool = comps.next().unwrap_or("");
    validate_pool_name(pool).map_err(|_| format!("invalid dataset name '{n}'"))?;
    for c in comps {
        if !name_component_ok(c) {
            return Err(format!(
                "invalid dataset name '{n}': components contain only letters, digits and _-.:"
            ));
        }
    }
    Ok(())
}

/// The pool a dataset belongs to: its first component.
pub fn pool_of(ds: &str) -> &str {
    ds.split('/').next().unwrap_or(ds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parse_request_lines() {
        let r = parse_request(r#"{"op":"pool.list","args":{"name":"tank"}}"#).unwrap();
        assert_eq!(r.op, "pool.list");
        assert_eq!(r.args, json!({"name":"tank"}));
        let r = parse_request(r#"{"op":"pool.list"}"#).unwrap();
        assert_eq!(r.args, json!({}));
        for bad in [
            "",
            "nope",
            "[]",
            "{}",
            r#"{"op":1}"#,
            r#"{"op":"x","zz":1}"#,
        ] {
            assert!(parse_request(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn args_validation() {
        let v = json!({"name":"tank","n":3,"b":true,"l":["a","b"],"s":"1K"});
        assert!(Args::new("op", &v, &["name"]).is_err());
        let a = Args::new("op", &v, &["name", "n", "b", "l", "s"]).unwrap();
        assert_eq!(a.str("name").unwrap(), "tank");
        assert!(a.str("n").is_err());
        assert!(a.str("missing").is_err());
        assert_eq!(a.u64("n").unwrap(), 3);
        assert!(a.u64("name").is_err());
        assert!(a.bool("b").unwrap());
        assert!(!a.bool("missing").unwrap());
        assert!(a.bool("n").is_err());
        assert_eq!(a.str_list("l").unwrap(), vec!["a", "b"]);
        assert!(a.str_list("name").is_err());
        assert_eq!(a.opt_size("s").unwrap(), Some(1024));
        assert_eq!(a.opt_size("n").unwrap(), Some(3));
        assert!(a.opt_size("name").is_err());
        assert!(Args::new("op", &json!([1]), &[]).is_err());
        assert!(Args::new("op", &json!(-1), &[]).is_err());
        let neg = Args::new("op", &json!({"n": -1}), &["n"]).unwrap();
        assert!(neg.u64("n").is_err());
    }

    #[test]
    fn props_forms() {
        let a = Args::new("op", &json!({"p": ["a=1", "b=x=y"]}), &["p"]).unwrap();
        assert_eq!(
            a.props("p").unwrap(),
            vec![("a".into(), "1".into()), ("b".into(), "x=y".into())]
        );
        let a = Args::new("op", &json!({"p": {"a": "1"}}), &["p"]).unwrap();
        assert_eq!(a.props("p").unwrap(), vec![("a".into(), "1".into())]);
        let a = Args::new("op", &json!({"p": [["a", "1"]]}), &["p"]).unwrap();
        assert_eq!(a.props("p").unwrap(), vec![("a".into(), "1".into())]);
        for bad in [
            json!({"p": ["novalue"]}),
            json!({"p": 3}),
            json!({"p": ["A=1"]}),
        ] {
            let a = Args::new("op", &bad, &["p"]).unwrap();
            assert!(a.props("p").is_err(), "{bad}");
        }
    }

    #[test]
    fn names() {
        for ok in ["tank", "t", "tank-1", "my.pool:x"] {
            validate_pool_name(ok).unwrap();
        }
        for bad in [
            "", "1tank", "mirror", "log", "ta nk", "tank/x", "-x", "tank@s",
        ] {
            assert!(validate_pool_name(bad).is_err(), "{bad:?}");
        }
        for ok in ["tank", "tank/db", "tank/db/log_1"] {
            validate_dataset_name(ok).unwrap();
        }
        for bad in [
            "",
            "tank/",
            "/tank",
            "tank//x",
            "tank/a b",
            "tank/db@s",
            "tank/..",
            "9/x",
        ] {
            assert!(validate_dataset_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(pool_of("tank/db/x"), "tank");
        assert_eq!(pool_of("tank"), "tank");
    }

    #[test]
    fn one_line_messages() {
        assert_eq!(one_line("a\nb\n"), "a; b");
        assert_eq!(one_line(""), "unknown error");
        let r = Response::err("x\ny");
        assert_eq!(r.error.as_deref(), Some("x; y"));
        assert_eq!(Response::ok(json!(1)).into_result(), Ok(json!(1)));
    }
}
