//! The route table against its description: every `/api/v1` route is in the
//! OpenAPI document, every documented operation answers (no 404/405 from the
//! router), and every documented change refuses a request without a valid token.

use crate::daemon::Daemon;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tower::ServiceExt;

/// `(path, method)` of every documented operation.
fn documented() -> Vec<(String, String)> {
    let doc = serde_json::to_value(super::routes::openapi()).unwrap();
    let mut out = vec![];
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in ["get", "post", "put", "delete", "patch"] {
            if item.get(method).is_some() {
                out.push((path.clone(), method.to_uppercase()));
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Paths given to `.route("...")` anywhere in the daemon's source.
fn raw_routes() -> Vec<String> {
    let mut files = vec![];
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let mut out = vec![];
    let needle = concat!(".route", "(");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let mut rest = text.as_str();
        while let Some(i) = rest.find(needle) {
            rest = rest[i + needle.len()..].trim_start();
            if let Some(lit) = rest.strip_prefix('"') {
                if let Some(end) = lit.find('"') {
                    out.push(lit[..end].to_string());
                }
            }
        }
    }
    out
}

#[test]
fn every_api_route_is_documented() {
    let paths: Vec<String> = documented().into_iter().map(|(p, _)| p).collect();
    let raw = raw_routes();
    assert!(
        raw.iter().any(|r| r == "/api/v1/call"),
        "the scan finds routes: {raw:?}"
    );
    // Every JSON route: the analytics UI's older `/api/analytics/X` ones are
    // aliases, each of which must have its `/api/v1/analytics/X` described.
    for r in raw.iter().filter(|r| r.starts_with("/api/")) {
        let described = match r.strip_prefix("/api/analytics/") {
            Some("openapi.json") => continue,
            Some(x) => format!("/api/v1/analytics/{x}"),
            None => r.clone(),
        };
        assert!(
            paths.contains(&described),
            "route {r} is missing from /api/v1/openapi.json (as {described})"
        );
    }
    // The resource routes themselves (registered through their attributes).
    for p in [
        "/api/v1/pools",
        "/api/v1/pools/{pool}",
        "/api/v1/pools/{pool}/scrub",
        "/api/v1/datasets",
        "/api/v1/datasets/{name}/properties/{prop}",
        "/api/v1/snapshots/{name}/rollback",
        "/api/v1/snapshots/{name}/clone",
        "/api/v1/shares/nfs/{name}",
        "/api/v1/jobs/{id}",
        "/api/v1/jobs/{id}/events",
        "/api/v1/pools/{pool}/replace",
        "/api/v1/shares/iscsi/{name}",
        "/api/v1/shares/nbd/{name}",
        "/api/v1/replication",
        "/api/v1/replication/{name}",
        "/api/v1/replication/{name}/run",
        "/api/v1/replication/{name}/pause",
        "/api/v1/replication/{name}/resume",
        "/api/v1/replication/{name}/break",
        "/api/v1/replication/{name}/resync",
        "/api/v1/replication/{name}/reverse",
        "/api/v1/snapshots/{name}/diff",
        "/api/v1/snapshots/{name}/holds",
        "/api/v1/snapshots/{name}/holds/{tag}",
        "/api/v1/analytics/series",
        "/api/v1/analytics/heatmap",
        "/api/v1/analytics/usage",
        "/api/v1/analytics/overview",
        "/api/v1/peers",
        "/api/v1/peers/token",
        "/api/v1/tokens/first",
        "/api/v1/setup",
        "/api/v1/openapi.json",
    ] {
        assert!(paths.iter().any(|x| x == p), "{p} not documented");
    }
}

fn test_daemon(tag: &str) -> (Arc<Daemon>, PathBuf) {
    let d = std::env::temp_dir().join(format!("cachalot-api-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    (Arc::new(Daemon::open(&d, 64 << 20).unwrap()), d)
}

async fn send(
    app: &axum::Router,
    method: &str,
    uri: &str,
    token: Option<&str>,
) -> (StatusCode, Vec<u8>) {
    let mut b = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        b = b.header("authorization", format!("Bearer {t}"));
    }
    let resp = app
        .clone()
        .oneshot(b.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, body.to_vec())
}

#[tokio::test]
async fn every_documented_route_answers_and_changes_need_a_token() {
    let (d, home) = test_daemon("routes");
    let app = crate::http::router(d.clone());
    let good = d.token().to_string();
    let ops = documented();
    assert!(ops.len() >= 25, "{ops:?}");
    for (path, method) in &ops {
        let uri = path
            .replace("{pool}", "nosuch")
            .replace("{name}", "nosuch%2Fx")
            .replace("{prop}", "quota")
            .replace("{id}", "999");
        let uri = if uri.ends_with("/analytics/show") {
            format!("{uri}?stat=x")
        } else {
            uri
        };
        let (st, body) = send(&app, method, &uri, None).await;
        assert_ne!(st, StatusCode::METHOD_NOT_ALLOWED, "{method} {uri}");
        assert!(
            !(st == StatusCode::NOT_FOUND && body.is_empty()),
            "{method} {uri}: no such route"
        );
        if path == "/api/v1/tokens/first" {
            // The one change made without a token: its proof is the one-time setup
            // code in the body (see setup_routes); without one it is refused.
            assert_eq!(st, StatusCode::BAD_REQUEST, "{method} {uri} without a code");
            continue;
        }
        if method == "GET" || path == "/api/v1/call" {
            continue;
        }
        assert_eq!(
            st,
            StatusCode::UNAUTHORIZED,
            "{method} {uri} without a token"
        );
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["error"]["code"], "unauthorized", "{method} {uri}");
        let (st, _) = send(&app, method, &uri, Some("not-a-token")).await;
        assert_eq!(st, StatusCode::FORBIDDEN, "{method} {uri} with a bad token");
        let (st, body) = send(&app, method, &uri, Some(&good)).await;
        assert!(
            st != StatusCode::UNAUTHORIZED && st != StatusCode::FORBIDDEN,
            "{method} {uri} with the token: {st} {}",
            String::from_utf8_lossy(&body)
        );
    }
    let (st, body) = send(&app, "GET", "/api/v1/openapi.json", None).await;
    assert_eq!(st, StatusCode::OK);
    let doc: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert!(doc["paths"]["/api/v1/datasets"]["post"].is_object());
    d.shutdown();
    std::fs::remove_dir_all(&home).unwrap();
}

async fn send_json(
    app: &axum::Router,
    method: &str,
    uri: &str,
    token: &str,
    body: serde_json::Value,
) -> (StatusCode, serde_json::Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or_default())
}

/// Error codes follow the engine's error kind, not the message's words: these
/// engine refusals are `StoreError::Invalid` whose text matches none of the
/// message rules (`classify` calls them `failed`, 422), and a missing pool is
/// not-found by kind.
#[tokio::test]
async fn error_codes_come_from_the_error_kind() {
    let (d, home) = test_daemon("kinds");
    let app = crate::http::router(d.clone());
    let t = d.token().to_string();
    let img = home.join("d0.img");
    let (st, v) = send_json(
        &app,
        "POST",
        "/api/v1/pools",
        &t,
        serde_json::json!({"name": "tank", "vdevs": [img], "size": "128M"}),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = send_json(
        &app,
        "POST",
        "/api/v1/datasets",
        &t,
        serde_json::json!({"name": "tank/vol", "volume_size": "16M"}),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    for (method, uri, body) in [
        // "'tank/vol' is not a clone"
        (
            "POST",
            "/api/v1/datasets/tank%2Fvol/promote",
            serde_json::json!({}),
        ),
        // "property 'recordsize' does not apply to volumes (...)"
        (
            "PUT",
            "/api/v1/datasets/tank%2Fvol/properties/recordsize",
            serde_json::json!({"value": "16K"}),
        ),
    ] {
        let (st, v) = send_json(&app, method, uri, &t, body).await;
        let msg = v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert_eq!(
            super::error::classify(&msg),
            "failed",
            "the message rules alone would not find this one: {msg}"
        );
        assert_eq!(st, StatusCode::BAD_REQUEST, "{method} {uri}: {v}");
        assert_eq!(v["error"]["code"], "invalid_request", "{v}");
    }
    let (st, v) = send_json(
        &app,
        "POST",
        "/api/v1/pools/nosuch/scrub",
        &t,
        serde_json::json!({}),
    )
    .await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
    // The RPC endpoint carries the kind too.
    let (_, v) = send_json(
        &app,
        "POST",
        "/api/v1/call",
        &t,
        serde_json::json!({"op": "snap.promote", "args": {"name": "tank/vol"}}),
    )
    .await;
    assert_eq!(v["code"], "invalid_request", "{v}");
    d.shutdown();
    std::fs::remove_dir_all(&home).unwrap();
}
