//! What the dashboard reads about a runtime's work: the last hour minute by
//! minute, a filtered page of jobs, one job in full. Reads only.

use axum::Json;
use axum::extract::State;
use relayger_core::ErrorCode;
use relayger_core::job_filter::{JobFilter, JobFilterText};
use relayger_core::lookup::{JOB_REF_RULE, JobRef};
use relayger_core::paging;
use relayger_core::wire::{JobDetail, JobSearchPage, RuntimeActivity, Scope};
use serde::Deserialize;
use uuid::Uuid;

use crate::extract::{ApiPath, ApiQuery, Auth};
use crate::{ApiError, AppState};

pub(crate) async fn activity(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(runtime_id): ApiPath<Uuid>,
) -> Result<Json<RuntimeActivity>, ApiError> {
    auth.require(Scope::Read)?;
    let minutes = state
        .store
        .runtime_activity(&auth.0.caller(), runtime_id)
        .await?;
    Ok(Json(RuntimeActivity { minutes }))
}

/// `?state&room&sender&since&until&limit&after`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobsQuery {
    state: Option<String>,
    room: Option<Uuid>,
    sender: Option<String>,
    since: Option<String>,
    until: Option<String>,
    limit: Option<u32>,
    after: Option<Uuid>,
}

pub(crate) async fn jobs(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(runtime_id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<JobsQuery>,
) -> Result<Json<JobSearchPage>, ApiError> {
    auth.require(Scope::Read)?;
    let invalid = |message: String| ApiError::new(ErrorCode::InvalidArgument, message);
    let page_size = paging::JOBS.page_size(query.limit).map_err(invalid)?;
    let filter = JobFilter::parse(JobFilterText {
        state: query.state.as_deref(),
        room: query.room,
        sender: query.sender.as_deref(),
        since: query.since.as_deref(),
        until: query.until.as_deref(),
    })
    .map_err(invalid)?;
    let (jobs, next) = state
        .store
        .search_jobs(
            &auth.0.caller(),
            runtime_id,
            &filter,
            query.after,
            page_size,
        )
        .await?;
    Ok(Json(JobSearchPage { jobs, next }))
}

pub(crate) async fn job(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath((runtime_id, job)): ApiPath<(Uuid, String)>,
) -> Result<Json<JobDetail>, ApiError> {
    auth.require(Scope::Read)?;
    let job = JobRef::parse(&job)
        .ok_or_else(|| ApiError::new(ErrorCode::InvalidArgument, JOB_REF_RULE))?;
    Ok(Json(
        state
            .store
            .job_detail(&auth.0.caller(), runtime_id, &job)
            .await?,
    ))
}
