//! The analytics queries of the web UI's analytics pages as `/api/v1` routes,
//! in the generated OpenAPI document: `GET /api/v1/analytics/series`,
//! `.../heatmap` (the query of `/api/v1/analytics/show`), `.../usage` and
//! `.../overview` (the overview page's pools and datasets). The older
//! `/api/analytics/*` routes (`http/analytics.rs`, which the UI reads) run the
//! same ops and stay as aliases of these.
//!
//! Invariants: each query route decodes strictly ([`Q`]) into one typed request
//! and runs it through `Daemon::handle`, as the CLI's `analytics` commands do;
//! all are reads (no token).

use super::error::{ApiError, ErrorBody};
use super::requests::{AnalyticsHeatmap, AnalyticsSeries, AnalyticsShow, AnalyticsUsage};
use super::routes::{run, ShowQuery, Q};
use crate::daemon::Daemon;
use axum::extract::State;
use axum::Json;
use serde_json::Value;
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

type D = State<Arc<Daemon>>;
type ApiResult = Result<Json<Value>, ApiError>;

/// A statistic's per-second series over a range, one per breakdown value.
#[utoipa::path(get, path = "/api/v1/analytics/series", tag = "analytics", params(ShowQuery),
    responses((status = 200, description = "{stat, by, step, series: [{key, points}]}", body = Value),
              (status = "4XX", description = "Bad query", body = ErrorBody)))]
async fn analytics_series(State(d): D, Q(q): Q<ShowQuery>) -> ApiResult {
    run(d, AnalyticsSeries(AnalyticsShow::from(q))).await
}

/// A statistic's heat map over a range (`by` latency or size).
#[utoipa::path(get, path = "/api/v1/analytics/heatmap", tag = "analytics", params(ShowQuery),
    responses((status = 200, description = "Buckets per second", body = Value),
              (status = "4XX", description = "Bad query", body = ErrorBody)))]
async fn analytics_heatmap(State(d): D, Q(q): Q<ShowQuery>) -> ApiResult {
    run(d, AnalyticsHeatmap(AnalyticsShow::from(q))).await
}

/// What the analytics themselves cost (series kept, memory).
#[utoipa::path(get, path = "/api/v1/analytics/usage", tag = "analytics",
    responses((status = 200, description = "The analytics' usage", body = Value)))]
async fn analytics_usage(State(d): D) -> ApiResult {
    run(d, AnalyticsUsage {}).await
}

/// The overview page: pools and datasets with their space and health.
#[utoipa::path(get, path = "/api/v1/analytics/overview", tag = "analytics",
    responses((status = 200, description = "{pools, datasets}", body = Value)))]
async fn analytics_overview(State(d): D) -> ApiResult {
    tokio::task::spawn_blocking(move || d.overview())
        .await
        .map(Json)
        .map_err(|e| ApiError::new("internal", format!("internal error: {e}")))
}

/// Add these routes (with their description) to the API's router.
pub fn add(r: OpenApiRouter<Arc<Daemon>>) -> OpenApiRouter<Arc<Daemon>> {
    r.routes(routes!(analytics_series))
        .routes(routes!(analytics_heatmap))
        .routes(routes!(analytics_usage))
        .routes(routes!(analytics_overview))
}
