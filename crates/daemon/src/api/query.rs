//! Query strings on routes that take none: refused, as unknown body fields are.
//!
//! A route that takes query parameters decodes them strictly (`routes::Q`, an
//! unknown one is 400); a route without any would otherwise ignore them, so a
//! client that thinks it passed an option (`DELETE /pools/tank?force=true`) would
//! learn nothing. This layer refuses, with 400 `invalid_request` and before the
//! handler runs, any query string on an operation whose OpenAPI description
//! declares no query parameter.
//!
//! Invariants:
//! - The description is the one served at `/api/v1/openapi.json`, generated from
//!   the handlers' `#[utoipa::path]`, whose `params(...)` for a query are the
//!   struct `Q` decodes; so a handler that reads a query it does not document is
//!   refused at once, never silently served.
//! - Routes outside the description (`/status`, the UI, `/api/analytics/*`) are
//!   left alone: the layer judges only what the document describes.
//!   `POST /api/v1/call` refuses a query string itself ([`unexpected`]), in its
//!   own answer shape.
//! - The error names the parameters, never their values (a token pasted into a
//!   URL is not echoed).

use super::error::ApiError;
use axum::extract::{MatchedPath, Query, Request};
use axum::http::{Method, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashSet;
use std::sync::OnceLock;

/// `(METHOD, path)` of every documented operation that declares no query parameter.
fn without_query() -> &'static HashSet<(String, String)> {
    static SET: OnceLock<HashSet<(String, String)>> = OnceLock::new();
    SET.get_or_init(|| {
        let doc = serde_json::to_value(super::routes::openapi()).unwrap_or_default();
        let mut set = HashSet::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            for (method, op) in item.as_object().into_iter().flatten() {
                let takes_query = op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p["in"] == "query");
                if op.is_object() && !takes_query {
                    set.insert((method.to_ascii_uppercase(), path.clone()));
                }
            }
        }
        set
    })
}

/// The parameter names of a request's query string, decoded, each once, in order.
fn names(uri: &axum::http::Uri) -> Vec<String> {
    let pairs = Query::<Vec<(String, String)>>::try_from_uri(uri).map_or(Vec::new(), |q| q.0);
    let mut out: Vec<String> = Vec::new();
    for (name, _) in pairs {
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// The refusal of the request's query string on a route that takes none, or
/// None when it has none.
pub fn unexpected(method: &Method, uri: &Uri) -> Option<ApiError> {
    if uri.query().unwrap_or_default().is_empty() {
        return None;
    }
    let list = names(uri)
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ");
    Some(ApiError::invalid(format!(
        "query string: {method} {} takes no query parameters (got {list})",
        uri.path()
    )))
}

/// The layer (`route_layer`, so the matched route is known).
pub async fn refuse_undocumented(path: Option<MatchedPath>, req: Request, next: Next) -> Response {
    let documented_without = path.is_some_and(|p| {
        without_query().contains(&(req.method().as_str().to_string(), p.as_str().to_string()))
    });
    if documented_without {
        if let Some(e) = unexpected(req.method(), req.uri()) {
            return e.into_response();
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_routes_without_a_query_are_known() {
        let set = without_query();
        assert!(set.contains(&("GET".into(), "/api/v1/pools".into())));
        assert!(set.contains(&("POST".into(), "/api/v1/call".into())));
        assert!(set.contains(&("DELETE".into(), "/api/v1/pools/{pool}".into())));
        // These document a query (destroy's force/recursive, the list's filters).
        assert!(!set.contains(&("DELETE".into(), "/api/v1/datasets/{name}".into())));
        assert!(!set.contains(&("GET".into(), "/api/v1/datasets".into())));
    }

    #[test]
    fn parameter_names_are_decoded_once_each() {
        let uri = |q: &str| format!("/api/v1/pools?{q}").parse().unwrap();
        assert_eq!(names(&uri("a=1&b&a=2&c%5Fd=x&&")), ["a", "b", "c_d"]);
        assert_eq!(names(&uri("token=SECRET")), ["token"]);
    }
}
