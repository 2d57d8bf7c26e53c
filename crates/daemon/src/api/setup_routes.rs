//! First run from the browser: `GET /api/v1/setup` says whether the first API
//! token is still to be made (and the name of the one-time setup code's file in
//! the daemon's home), and
//! `POST /api/v1/tokens/first` exchanges that code for the first named token.
//! Why this is safe is in [`super::tokens`]: the code is in a root-only file, so
//! it proves the same access `HOME/token` does, and it works once.
//!
//! Invariants:
//! - These are the only routes that mint a token over HTTP, and only while no
//!   named token exists; they run no op of `Daemon::handle` (token ops stay unix
//!   socket only, see `tokens::UNIX_ONLY_OPS`).
//! - The code and the token travel in bodies only (never a URL); the log names
//!   the token, never a secret.
//! - Answers name the code's file relative to the daemon's home, never its
//!   absolute path: these routes are open, and the home's path is the appliance's
//!   business (the daemon's log and the docs name it for whoever is root there).
//! - The code's check and the token it makes are one step under the token
//!   registry's write lock ([`super::tokens`]); attempts also queue here, on an
//!   async lock, so waiting ones hold no blocking thread. A
//!   wrong code answers after [`WRONG_CODE_DELAY`], taken outside the lock: a flood of
//!   wrong guesses must not queue the admin's right one behind their delays, and a
//!   128-bit code is not guessable at any rate, so the delay only slows a script.

use super::error::{ApiError, ErrorBody};
use super::routes::Body;
use super::tokens::SETUP_CODE_FILE;
use crate::daemon::Daemon;
use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

type D = State<Arc<Daemon>>;
type ApiResult = Result<Json<Value>, ApiError>;

/// How long a wrong setup code waits before its answer.
pub const WRONG_CODE_DELAY: Duration = Duration::from_secs(1);

/// Queues first-token attempts (not the delay of a wrong one) off the blocking pool.
static ATTEMPT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The one-time setup code and the new token's name.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FirstTokenBody {
    /// The code in `HOME/setup-code` on the appliance.
    pub code: String,
    /// The token's name (1 to 64 letters, digits, `_-.`).
    pub name: String,
}

/// Whether the first API token is still to be made (open: the login page asks).
#[utoipa::path(get, path = "/api/v1/setup", tag = "meta",
    responses((status = 200, description = "{\"first_token\": true, \"setup_code_file\": \"setup-code\"} while no \
               named token exists and the one-time code is in that file of the daemon's home (named, not its \
               path), else {\"first_token\": false}", body = Value)))]
async fn setup_state(State(d): D) -> Json<Value> {
    Json(if d.api.tokens.setup_code_ready() {
        json!({ "first_token": true, "setup_code_file": SETUP_CODE_FILE })
    } else {
        json!({ "first_token": false })
    })
}

/// Exchange the one-time setup code for the first named API token (once).
#[utoipa::path(post, path = "/api/v1/tokens/first", tag = "meta", request_body = FirstTokenBody,
    responses((status = 200, description = "{\"name\", \"token\"}: the secret, shown once", body = Value),
              (status = 403, description = "Wrong setup code; nothing created", body = ErrorBody),
              (status = 409, description = "A named token exists already; nothing created", body = ErrorBody),
              (status = 400, description = "Bad name or body; nothing created", body = ErrorBody)))]
async fn first_token(State(d): D, Body(b): Body<FirstTokenBody>) -> ApiResult {
    let name = b.name.clone();
    let d2 = d.clone();
    let res = {
        let _one_at_a_time = ATTEMPT.lock().await;
        tokio::task::spawn_blocking(move || d2.api.tokens.first(&b.code, &b.name))
            .await
            .map_err(|e| ApiError::new("internal", format!("internal error: {e}")))?
    };
    match res {
        Ok(secret) => {
            eprintln!("cachalot: API token '{name}' created with the setup code");
            Ok(Json(json!({ "name": name, "token": secret })))
        }
        Err((code, msg)) => {
            if code == "forbidden" {
                eprintln!("cachalot: first API token refused: wrong setup code");
                tokio::time::sleep(WRONG_CODE_DELAY).await;
            }
            Err(ApiError::new(code, msg))
        }
    }
}

/// Add these routes (with their description) to the API's router.
pub fn add(r: OpenApiRouter<Arc<Daemon>>) -> OpenApiRouter<Arc<Daemon>> {
    r.routes(routes!(setup_state)).routes(routes!(first_token))
}
