//! The request extractors of the REST routes (re-exported by [`super::routes`]):
//! [`Auth`] (a valid token, checked before anything is parsed), [`Body`] (a strictly
//! decoded JSON body), [`NoBody`] (empty or `{}` only) and [`Q`] (a strictly decoded
//! query string); and [`check_token`], which `POST /api/v1/call` shares with `Auth`.
//!
//! Invariant: every rejection is an [`ApiError`] with a stable code (401/403 for
//! the token, 400 `invalid_request` for a body or query string), so a refused
//! request never reaches `Daemon::handle`.

use super::error::ApiError;
use crate::daemon::Daemon;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::header;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::sync::Arc;

/// The caller's token, checked (its name).
pub struct Auth(pub String);

/// The secret of `Authorization: Bearer SECRET`, if the header has that form.
pub fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| rest.trim())
        .filter(|t| !t.is_empty())
}

impl FromRequestParts<Arc<Daemon>> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, d: &Arc<Daemon>) -> Result<Auth, ApiError> {
        check_token(d, &parts.headers).map(Auth)
    }
}

/// The name of the valid token the request carries: 401 `unauthorized` without
/// a bearer token, 403 `forbidden` with one that is unknown or revoked (the REST
/// routes through [`Auth`], `POST /api/v1/call` for its changes).
pub fn check_token(d: &Daemon, headers: &axum::http::HeaderMap) -> Result<String, ApiError> {
    match bearer(headers) {
        None => Err(ApiError::new(
            "unauthorized",
            "this request changes something: send 'Authorization: Bearer TOKEN' \
             (create one with: cachalot token create NAME)",
        )),
        Some(t) => d.api.tokens.check(t).ok_or_else(|| {
            ApiError::new("forbidden", "the token is not valid (unknown or revoked)")
        }),
    }
}

/// A strictly decoded JSON body (an empty body is `{}`).
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Body<T>, ApiError> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::invalid(format!("request body: {}", e.body_text())))?;
        let raw: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        serde_json::from_slice(raw)
            .map(Body)
            .map_err(|e| ApiError::invalid(format!("request body: {e}")))
    }
}

/// The body of an operation that takes none: empty or `{}`. Anything else (a
/// field, another JSON type) is refused like any bad body, so a client that
/// thinks it passed an option learns it did not.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoBody {}

/// A strictly decoded query string.
pub struct Q<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Q<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Q<T>, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(t)| Q(t))
            .map_err(|e| ApiError::invalid(format!("query string: {}", e.body_text())))
    }
}
