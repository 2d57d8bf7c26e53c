//! The wire protocol shared by the unix socket and HTTP: one JSON request
//! `{"op": "...", "args": {...}}`, one JSON response `{"ok": true, "result": ...}` or
//! `{"ok": false, "error": "one-line message"}`. The daemon's decoding and argument
//! validation of these live in the daemon (`cachalot_daemon::proto`).
//!
//! Invariant: error messages are always a single line (newlines are replaced by "; ").

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One request.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Request {
    pub op: String,
    #[serde(default)]
    pub args: Value,
}

impl Request {
    pub fn new(op: &str, args: Value) -> Request {
        Request {
            op: op.to_string(),
            args,
        }
    }
}

/// One response.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The error's kind as an API code (`not_found`, `busy`...), when the op
    /// knew it (see `error_kind`); clients that only show `error` ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

impl Response {
    pub fn ok(result: Value) -> Response {
        Response {
            ok: true,
            result: Some(result),
            error: None,
            code: None,
        }
    }

    pub fn err(msg: impl std::fmt::Display) -> Response {
        Response {
            ok: false,
            result: None,
            error: Some(one_line(&msg.to_string())),
            code: None,
        }
    }

    /// The result, or the error message.
    pub fn into_result(self) -> Result<Value, String> {
        if self.ok {
            Ok(self.result.unwrap_or(Value::Null))
        } else {
            Err(self
                .error
                .unwrap_or_else(|| "request failed (no message)".to_string()))
        }
    }
}

/// Collapse a message onto one line.
pub fn one_line(s: &str) -> String {
    let t = s.trim();
    if t.is_empty() {
        return "unknown error".to_string();
    }
    t.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}
