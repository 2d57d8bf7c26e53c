//! The HTTP transport (axum on its own tokio runtime in a background thread):
//! `POST /api/v1/call` takes the same JSON request as the unix socket and returns the
//! same JSON response; the resource routes under `/api/v1/` are in
//! [`crate::api::routes`]; `GET /status` is a small status page; the analytics API,
//! `/metrics` and the web UI at `/` are in [`analytics`].
//!
//! Invariants:
//! - Only read-only ops ([`crate::daemon::is_read_only`]) run without a token; every
//!   other op needs `Authorization: Bearer <token>` (a named token or `HOME/token`,
//!   see [`crate::api::tokens`]): 401 without one, 403 with an unknown or revoked
//!   one. Tokens are compared in constant time. Token management ops are refused
//!   here whatever the token.
//! - Every `ok: false` answer of `/api/v1/call` carries `code`, the REST API's
//!   stable error code (`api::error::CODES`) of the same error: refusals before
//!   the op with the code's HTTP status, the op's own errors with 200.
//! - Ops run on tokio's blocking pool, never on the async workers.
//! - The listener is bound before this returns, so a bad address fails the start.

pub mod analytics;

use crate::api::error::{response_code, ApiError};
use crate::daemon::{is_read_only, Daemon};
use crate::proto::{parse_request, Response};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{Html, IntoResponse};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;

/// Bind `addr` and serve in a background thread (HTTPS with `tls`); returns the
/// bound address.
pub fn start_http(
    addr: &str,
    daemon: Arc<Daemon>,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
) -> anyhow::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| anyhow::anyhow!("http: cannot bind {addr}: {e}"))?;
    listener.set_nonblocking(true)?;
    let local = listener.local_addr()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(64)
        .thread_name("cachalot-http")
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("cachalot-http".into())
        .spawn(move || {
            rt.block_on(async move {
                let l = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => {
                        eprintln!("cachalot: http: {e}");
                        return;
                    }
                };
                let served = match tls {
                    Some(cfg) => match crate::api::tls::TlsListener::new(l, cfg) {
                        Ok(tl) => axum::serve(tl, router(daemon)).await,
                        Err(e) => Err(e),
                    },
                    None => axum::serve(l, router(daemon)).await,
                };
                if let Err(e) = served {
                    eprintln!("cachalot: http server stopped: {e}");
                }
            })
        })?;
    Ok(local)
}

/// The routes.
pub fn router(daemon: Arc<Daemon>) -> Router {
    Router::new()
        .merge(crate::api::routes::router())
        .route_layer(axum::middleware::from_fn(
            crate::api::query::refuse_undocumented,
        ))
        .route("/status", get(index))
        .route("/api/v1/call", post(call))
        .merge(analytics::routes())
        .with_state(daemon)
}

fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// True if the request carries the daemon's token.
pub fn authorized(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| ct_eq(t.trim().as_bytes(), token.as_bytes()))
}

/// A refusal of `POST /api/v1/call` before any op runs: `{"ok": false, "error",
/// "code"}` with the code's HTTP status (401 also names the scheme, as the REST
/// routes' refusals do).
fn rpc_refusal(e: ApiError) -> axum::response::Response {
    let status = e.status();
    let body = Json(Response {
        code: Some(e.code.to_string()),
        ..Response::err(e.message)
    });
    if status == StatusCode::UNAUTHORIZED {
        (status, [(header::WWW_AUTHENTICATE, "Bearer")], body).into_response()
    } else {
        (status, body).into_response()
    }
}

async fn call(
    State(d): State<Arc<Daemon>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    if let Some(e) = crate::api::query::unexpected(&Method::POST, &uri) {
        return rpc_refusal(e);
    }
    let req = match std::str::from_utf8(&body)
        .map_err(|_| "malformed request: not UTF-8".to_string())
        .and_then(parse_request)
    {
        Ok(r) => r,
        Err(e) => return rpc_refusal(ApiError::invalid(e)),
    };
    if crate::api::tokens::UNIX_ONLY_OPS.contains(&req.op.as_str()) {
        return rpc_refusal(ApiError::new(
            "forbidden",
            format!(
                "{}: token management is served on the unix socket only (cachalot token ...)",
                req.op
            ),
        ));
    }
    if !is_read_only(&req.op) {
        // The REST routes' answers: 401 without a bearer token, 403 with one
        // that is unknown or revoked.
        if let Err(e) = crate::api::routes::check_token(&d, &headers) {
            return rpc_refusal(ApiError::new(e.code, format!("{}: {}", req.op, e.message)));
        }
    }
    match tokio::task::spawn_blocking(move || d.handle(&req)).await {
        // The op ran (HTTP 200, as documented); a failed one carries its code,
        // the REST routes' code of the same error.
        Ok(mut r) => {
            if !r.ok {
                r.code = Some(response_code(&r).to_string());
            }
            (StatusCode::OK, Json(r)).into_response()
        }
        Err(e) => rpc_refusal(ApiError::new("internal", format!("internal error: {e}"))),
    }
}

async fn index(State(d): State<Arc<Daemon>>) -> impl IntoResponse {
    let ov = tokio::task::spawn_blocking(move || d.overview())
        .await
        .unwrap_or_else(|_| json!({"pools": [], "datasets": []}));
    Html(render_index(&ov))
}

/// Escape text for HTML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

fn cell(v: &Value, key: &str, size: bool) -> String {
    match v.get(key) {
        Some(Value::Number(n)) if size => n
            .as_u64()
            .map(crate::size::format_size)
            .unwrap_or_else(|| n.to_string()),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => esc(s),
        _ => "-".into(),
    }
}

/// The status page.
pub fn render_index(ov: &Value) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Cachalot</title>\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:left}}</style>\
         </head><body><h1>Cachalot</h1>{}</body></html>\n",
        render_tables(ov)
    )
}

/// The pools and datasets tables of the status page (also the UI's first paint).
pub fn render_tables(ov: &Value) -> String {
    let mut h = String::from(
        "<h2>Pools</h2><table><tr><th>NAME</th><th>SIZE</th><th>ALLOC</th><th>FREE</th><th>FRAG</th>\
         <th>CAP</th><th>HEALTH</th></tr>",
    );
    for p in ov["pools"].as_array().into_iter().flatten() {
        h.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}%</td><td>{}%</td><td>{}</td></tr>",
            cell(p, "name", false),
            cell(p, "size", true),
            cell(p, "alloc", true),
            cell(p, "free", true),
            cell(p, "frag", false),
            cell(p, "cap", false),
            cell(p, "health", false),
        ));
    }
    h.push_str(
        "</table><h2>Datasets</h2><table><tr><th>NAME</th><th>TYPE</th><th>USED</th>\
         <th>AVAIL</th><th>REFER</th><th>MOUNTPOINT</th></tr>",
    );
    for d in ov["datasets"].as_array().into_iter().flatten() {
        h.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            cell(d, "name", false),
            cell(d, "type", false),
            cell(d, "used", true),
            cell(d, "available", true),
            cell(d, "referenced", true),
            cell(d, "mountpoint", false),
        ));
    }
    h.push_str("</table>");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_check() {
        let mut h = HeaderMap::new();
        assert!(!authorized(&h, "abc"));
        h.insert(header::AUTHORIZATION, "Bearer abc".parse().unwrap());
        assert!(authorized(&h, "abc"));
        assert!(!authorized(&h, "abd"));
        assert!(!authorized(&h, "abcd"));
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert!(!authorized(&h, "abc"));
    }

    #[test]
    fn page_escapes() {
        let ov = json!({"pools": [{"name": "<b>", "size": 1024, "health": "ONLINE"}],
                        "datasets": [{"name": "t&x", "type": "filesystem"}]});
        let p = render_index(&ov);
        assert!(p.contains("&lt;b&gt;"));
        assert!(p.contains("t&amp;x"));
        assert!(p.contains("<td>1K</td>"));
        assert!(!p.contains("<b>"));
    }
}
