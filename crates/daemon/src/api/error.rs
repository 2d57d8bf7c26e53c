//! JSON errors of the REST API: `{"error": {"code": "not_found", "message": "..."}}`
//! with an HTTP status that follows from the code.
//!
//! Invariants:
//! - `code` is one of [`CODES`]: clients may match on it; the message is for people
//!   and may change.
//! - The code comes from the error's kind when the op knew it: engine errors
//!   (`StoreError::kind`) and the daemon's own not-found errors carry it in
//!   `Response::code` (see `crate::error_kind`). Only errors without a kind (the
//!   daemon's other messages) fall back to [`classify`], which maps one-line
//!   messages by fixed phrasings; anything it does not recognise is `failed`
//!   (HTTP 422), never a 5xx, unless the daemon itself reported an internal error.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

/// Every error code, with its HTTP status.
pub const CODES: &[(&str, u16)] = &[
    ("invalid_request", 400),
    ("unauthorized", 401),
    ("forbidden", 403),
    ("not_found", 404),
    ("already_exists", 409),
    ("busy", 409),
    ("failed", 422),
    ("unavailable", 503),
    ("internal", 500),
];

/// An API error.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct ApiError {
    /// Stable machine-readable code (see the list in the API description).
    pub code: &'static str,
    /// One line for people.
    pub message: String,
}

/// The error body: `{"error": {...}}`.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ApiError,
}

impl ApiError {
    pub fn new(code: &'static str, message: impl Into<String>) -> ApiError {
        debug_assert!(CODES.iter().any(|(c, _)| *c == code), "{code}");
        ApiError {
            code,
            message: crate::proto::one_line(&message.into()),
        }
    }

    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new("invalid_request", message)
    }

    pub fn status(&self) -> StatusCode {
        let n = CODES
            .iter()
            .find(|(c, _)| *c == self.code)
            .map_or(500, |(_, s)| *s);
        StatusCode::from_u16(n).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// An error message from the daemon, with its code.
    pub fn from_daemon(message: String) -> ApiError {
        ApiError::new(classify(&message), message)
    }

    /// A failed response of the daemon: its code from the error's kind when the
    /// op knew it (`Response::code`, see `error_kind`), else from the message.
    pub fn from_response(resp: crate::proto::Response) -> ApiError {
        let code = response_code(&resp);
        let message = resp
            .error
            .unwrap_or_else(|| "request failed (no message)".to_string());
        ApiError::new(code, message)
    }
}

/// The code of a failed daemon response: the kind's code the op recorded
/// (`Response::code`, see `error_kind`) when it is one of [`CODES`], else the
/// code of its message ([`classify`]).
pub fn response_code(resp: &crate::proto::Response) -> &'static str {
    resp.code
        .as_deref()
        .and_then(|c| CODES.iter().find(|(k, _)| *k == c).map(|(k, _)| *k))
        .unwrap_or_else(|| classify(resp.error.as_deref().unwrap_or("")))
}

/// The code of a daemon error message.
pub fn classify(msg: &str) -> &'static str {
    let m = msg.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| m.contains(w));
    if has(&["internal error"]) {
        "internal"
    } else if has(&["shutting down", "is unavailable"]) {
        "unavailable"
    } else if has(&[
        "invalid ",
        "missing argument",
        "unknown argument",
        "must be",
        "is not a snapshot name",
        "is not prop=val",
        "no devices given",
        "neither a vdev type",
        "absolute",
        "apply only to",
        "is a pool's root dataset",
        "not supported here",
        "longer than",
        "is not older than",
        "only filesystems can be mounted",
    ]) {
        "invalid_request"
    } else if has(&[
        "does not exist",
        "no such",
        "not found",
        "no pools available",
        "unknown statistic",
    ]) {
        "not_found"
    } else if has(&["already exists", "already imported"]) {
        "already_exists"
    } else if has(&["is not mounted"]) {
        // Before "busy", which matches "mounted": nothing is in the way, there is
        // just nothing to unmount.
        "failed"
    } else if has(&[
        "busy",
        "in use",
        "has children",
        "dependent clones",
        "is held by",
        "not the newest snapshot",
        "already running",
        "in progress",
        "mounted",
    ]) {
        "busy"
    } else {
        "failed"
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = Json(json!({ "error": self }));
        if status == StatusCode::UNAUTHORIZED {
            (status, [(header::WWW_AUTHENTICATE, "Bearer")], body).into_response()
        } else {
            (status, body).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_messages_get_codes() {
        for (msg, code) in [
            ("dataset 'tank/x' does not exist", "not_found"),
            ("pool 'tank' does not exist", "not_found"),
            ("dataset 'tank/x' already exists", "already_exists"),
            (
                "dataset 'tank/db' is busy (mounted or in use): unmount it first",
                "busy",
            ),
            ("'tank/a' has children: use -r to destroy them too", "busy"),
            ("invalid dataset name 'tank/a b'", "invalid_request"),
            ("ds.set: missing argument 'value'", "invalid_request"),
            ("internal error in ds.create: boom", "internal"),
            ("out of space in pool 'tank'", "failed"),
            (
                "'tank/v' is a volume: only filesystems can be mounted",
                "invalid_request",
            ),
            ("'tank/a' is already mounted at /mnt/a", "busy"),
            ("'tank/a' is not mounted", "failed"),
            (
                "unknown statistic 'nope.ops' (see 'cachalot analytics list')",
                "not_found",
            ),
        ] {
            assert_eq!(classify(msg), code, "{msg}");
            assert_eq!(ApiError::from_daemon(msg.into()).code, code);
        }
        assert_eq!(ApiError::new("busy", "x").status(), StatusCode::CONFLICT);
        assert_eq!(ApiError::invalid("a\nb").message, "a; b");
    }
}
