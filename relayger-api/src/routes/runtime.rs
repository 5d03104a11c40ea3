//! The persistent listener's runtime endpoints.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use relayger_core::handler_timeout::validate_requested_timeout_ms;
use relayger_core::job_result::InvalidResult;
use relayger_core::lookup::{JOB_REF_RULE, JobRef};
use relayger_core::notes::validate_note_key;
use relayger_core::runtime_name::{RUNTIME_NAME_RULE, is_valid_runtime_name};
use relayger_core::wire::{
    ClaimRequest, ClaimResponse, ConfigureRequest, Done, FinishBatchRequest, FinishBatchResponse,
    FinishRequest, FinishResponse, HeartbeatResponse, IdentityKind, JobFinishResult, JobList,
    JobResult, JobView, LeaseRequest, LogPage, MAX_FINISHES_PER_BATCH, Note, NoteInput, NoteList,
    NoteWrite, RegisterRuntimeRequest, Runtime, RuntimeList, RuntimeStats, Scope,
};
use relayger_core::{ErrorBody, ErrorCode};
use serde::Deserialize;
use uuid::Uuid;

use super::contacts::CONTACT_REQUESTS_HEADER;
use relayger_store::JobFinishInput;

use crate::extract::{ApiJson, ApiPath, ApiQuery, Auth, OptionalJson};
use crate::{ApiError, AppState};

/// Runtime writes need read + write on an agent identity.
fn require_agent_writer(auth: &Auth) -> Result<(), ApiError> {
    auth.require(Scope::Read)?.require(Scope::Write)?;
    if auth.0.identity.kind() != IdentityKind::Agent {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "runtimes belong to agent identities; use an agent's profile",
        ));
    }
    Ok(())
}

/// A runtime name: what `worker run NAME` types.
fn runtime_name(name: &str) -> Result<String, ApiError> {
    if is_valid_runtime_name(name) {
        Ok(name.to_owned())
    } else {
        Err(ApiError::new(ErrorCode::InvalidArgument, RUNTIME_NAME_RULE))
    }
}

pub(crate) async fn register(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(body): ApiJson<RegisterRuntimeRequest>,
) -> Result<(StatusCode, Json<Runtime>), ApiError> {
    require_agent_writer(&auth)?;
    let name = runtime_name(&body.name)?;
    if auth.0.rooms.is_some() {
        // A room-restricted worker may attach to a runtime that exists, not
        // take one of the agent's runtime slots.
        let runtimes = state.store.list_runtimes(&auth.0.caller()).await?;
        if !runtimes.iter().any(|r| r.name == name) {
            auth.require_unrestricted()?;
        }
    }
    let (runtime, created) = state
        .store
        .register_runtime(
            &auth.0.identity,
            name,
            body.from,
            body.policy.unwrap_or_default(),
        )
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    // A restricted worker attaching sees the runtime as inspect shows it
    // to its token, and the backlog of its rooms only.
    let runtime = if auth.0.rooms.is_some() {
        state
            .store
            .attached_runtime(&auth.0.caller(), runtime.id)
            .await?
    } else {
        runtime
    };
    Ok((status, Json(runtime)))
}

pub(crate) async fn list(
    State(state): State<AppState>,
    auth: Auth,
) -> Result<Json<RuntimeList>, ApiError> {
    auth.require(Scope::Read)?;
    Ok(Json(RuntimeList {
        runtimes: state.store.list_runtimes(&auth.0.caller()).await?,
    }))
}

pub(crate) async fn inspect(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(runtime_id): ApiPath<Uuid>,
) -> Result<Json<Runtime>, ApiError> {
    auth.require(Scope::Read)?;
    Ok(Json(
        state.store.runtime(&auth.0.caller(), runtime_id).await?,
    ))
}

pub(crate) async fn delete(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(runtime_id): ApiPath<Uuid>,
) -> Result<Json<Done>, ApiError> {
    require_agent_writer(&auth)?;
    auth.require_unrestricted()?;
    state
        .store
        .delete_runtime(auth.0.identity.id, runtime_id)
        .await?;
    Ok(Json(Done { ok: true }))
}

pub(crate) async fn configure(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(runtime_id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<ConfigureRequest>,
) -> Result<Json<Runtime>, ApiError> {
    require_agent_writer(&auth)?;
    auth.require_unrestricted()?;
    let runtime = state
        .store
        .configure_runtime(auth.0.identity.id, runtime_id, body.version, body.policy)
        .await?;
    state.hub.runtime_changed(auth.0.identity.id);
    Ok(Json(runtime))
}

pub(crate) async fn claim(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(runtime_id): ApiPath<Uuid>,
    OptionalJson(body): OptionalJson<ClaimRequest>,
) -> Result<(HeaderMap, Json<ClaimResponse>), ApiError> {
    require_agent_writer(&auth)?;
    let requested = match body.handler_timeout_ms {
        Some(ms) => Some(
            validate_requested_timeout_ms(ms)
                .map_err(|e| ApiError::new(ErrorCode::InvalidArgument, e.to_string()))?,
        ),
        None => None,
    };
    // Every claim carries the count, busy or idle, so a worker whose slots
    // are all taken by long jobs still accepts contacts. Only a token that
    // may see contacts (and is not restricted to rooms) learns it.
    let count_contact_requests = auth.0.has(Scope::Contacts) && auth.0.rooms.is_none();
    let claimed = state
        .store
        .claim(
            &auth.0.caller(),
            runtime_id,
            body.max_jobs.unwrap_or(1),
            requested,
            state.config.lease_ms,
            count_contact_requests,
        )
        .await?;
    let response = claimed.response;
    crate::metrics::record_claim(response.jobs.len());
    // Even a claim that grants nothing may have expired leases, made jobs
    // of new messages or skipped some by policy.
    state.hub.runtime_changed(auth.0.identity.id);
    let mut headers = HeaderMap::new();
    if let Some(count) = claimed.contact_requests {
        headers.insert(CONTACT_REQUESTS_HEADER, HeaderValue::from(count));
    }
    Ok((headers, Json(response)))
}

pub(crate) async fn heartbeat(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath((runtime_id, job_id)): ApiPath<(Uuid, Uuid)>,
    ApiJson(body): ApiJson<LeaseRequest>,
) -> Result<Json<HeartbeatResponse>, ApiError> {
    require_agent_writer(&auth)?;
    let extended = state
        .store
        .heartbeat(
            &auth.0.caller(),
            runtime_id,
            job_id,
            &body.owner,
            body.version,
            state.config.lease_ms,
        )
        .await?;
    state.hub.runtime_changed(auth.0.identity.id);
    Ok(Json(extended))
}

pub(crate) async fn release(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath((runtime_id, job_id)): ApiPath<(Uuid, Uuid)>,
    ApiJson(body): ApiJson<LeaseRequest>,
) -> Result<Json<Done>, ApiError> {
    require_agent_writer(&auth)?;
    state
        .store
        .release(
            &auth.0.caller(),
            runtime_id,
            job_id,
            &body.owner,
            body.version,
        )
        .await?;
    state.hub.runtime_changed(auth.0.identity.id);
    Ok(Json(Done { ok: true }))
}

/// A result's own rules ([`JobResult::validate`]): 422, an oversized reply
/// 413, a bad note 400 (as the note routes answer).
fn valid_result(result: &JobResult) -> Result<(), ApiError> {
    result.validate().map_err(|invalid| {
        let code = match invalid {
            InvalidResult::ReplyTooLarge(_) => ErrorCode::PayloadTooLarge,
            InvalidResult::Note(_) => ErrorCode::InvalidArgument,
            _ => ErrorCode::UnprocessableEntity,
        };
        ApiError::new(code, invalid.to_string())
    })
}

pub(crate) async fn finish(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath((runtime_id, job_id)): ApiPath<(Uuid, Uuid)>,
    ApiJson(body): ApiJson<FinishRequest>,
) -> Result<Json<FinishResponse>, ApiError> {
    require_agent_writer(&auth)?;
    valid_result(&body.result)?;
    let finished = state
        .store
        .finish(
            &auth.0.caller(),
            runtime_id,
            job_id,
            &body.owner,
            body.version,
            body.result,
        )
        .await?;
    state.hub.runtime_changed(auth.0.identity.id);
    Ok(Json(finished))
}

/// `POST /v1/runtimes/{id}/finishes`: the finishes a worker has ready, in
/// one transaction, one result per job. A request-wide problem (no such
/// runtime, a malformed batch) is the request's error; anything about one
/// job is that job's result, and the others commit.
pub(crate) async fn finish_batch(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(runtime_id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<FinishBatchRequest>,
) -> Result<Json<FinishBatchResponse>, ApiError> {
    require_agent_writer(&auth)?;
    let count = body.finishes.len();
    crate::metrics::record_finish_batch(count);
    if count == 0 || count > MAX_FINISHES_PER_BATCH {
        return Err(ApiError::new(
            ErrorCode::UnprocessableEntity,
            format!("a batch holds 1 to {MAX_FINISHES_PER_BATCH} finishes, got {count}"),
        ));
    }
    // A result that breaks a rule is refused alone; the rest go on.
    let mut results: Vec<Option<JobFinishResult>> = Vec::with_capacity(count);
    let mut inputs = Vec::with_capacity(count);
    for finish in body.finishes {
        match valid_result(&finish.result) {
            Ok(()) => {
                results.push(None);
                inputs.push(JobFinishInput {
                    job_id: finish.job_id,
                    owner: finish.owner,
                    version: finish.version,
                    result: finish.result,
                });
            }
            Err(refused) => results.push(Some(job_result(finish.job_id, Err(refused)))),
        }
    }
    let mut outcomes = if inputs.is_empty() {
        Vec::new()
    } else {
        state
            .store
            .finish_batch(&auth.0.caller(), runtime_id, &inputs)
            .await?
    }
    .into_iter()
    .zip(inputs.iter().map(|input| input.job_id));
    let results = results
        .into_iter()
        .filter_map(|refused| {
            refused.or_else(|| {
                outcomes
                    .next()
                    .map(|(outcome, job_id)| job_result(job_id, outcome.map_err(ApiError::from)))
            })
        })
        .collect::<Vec<_>>();
    state.hub.runtime_changed(auth.0.identity.id);
    Ok(Json(FinishBatchResponse { results }))
}

fn job_result(job_id: Uuid, outcome: Result<FinishResponse, ApiError>) -> JobFinishResult {
    match outcome {
        Ok(finished) => JobFinishResult {
            job_id,
            finished: Some(finished),
            error: None,
        },
        Err(err) => JobFinishResult {
            job_id,
            finished: None,
            error: Some(ErrorBody {
                code: err.code,
                message: err.message,
                details: err.details,
            }),
        },
    }
}

pub(crate) async fn dead_letters(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(runtime_id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<super::rooms::PageQuery>,
) -> Result<Json<JobList>, ApiError> {
    auth.require(Scope::Read)?;
    let page_size = query.page_size(relayger_core::paging::DEAD_LETTERS)?;
    // The store returns only dead letters of rooms the caller can still read.
    let (jobs, next) = state
        .store
        .dead_letters(&auth.0.caller(), runtime_id, query.after(), page_size)
        .await?;
    Ok(Json(JobList { jobs, next }))
}

pub(crate) async fn retry(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath((runtime_id, job)): ApiPath<(Uuid, String)>,
) -> Result<Json<JobView>, ApiError> {
    require_agent_writer(&auth)?;
    let job = JobRef::parse(&job)
        .ok_or_else(|| ApiError::new(ErrorCode::InvalidArgument, JOB_REF_RULE))?;
    let job = state
        .store
        .retry_dead_letter(&auth.0.caller(), runtime_id, &job)
        .await?;
    state.hub.runtime_changed(auth.0.identity.id);
    Ok(Json(job))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitQuery {
    limit: Option<i64>,
}

pub(crate) async fn log(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(runtime_id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<LimitQuery>,
) -> Result<Json<LogPage>, ApiError> {
    auth.require(Scope::Read)?;
    if query.limit.is_some_and(|l| l < 1) {
        return Err(ApiError::new(
            ErrorCode::InvalidArgument,
            "limit must be at least 1",
        ));
    }
    // Records of rooms the caller can no longer read (the token's rooms, a
    // room the agent left, a direct room whose contact ended) are filtered
    // out in the store before the limit, so a page is never short.
    let records = state
        .store
        .runtime_log(&auth.0.caller(), runtime_id, query.limit)
        .await?;
    Ok(Json(LogPage { records }))
}

pub(crate) async fn stats(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(runtime_id): ApiPath<Uuid>,
) -> Result<Json<RuntimeStats>, ApiError> {
    auth.require(Scope::Read)?;
    Ok(Json(
        state
            .store
            .runtime_stats(&auth.0.caller(), runtime_id)
            .await?,
    ))
}

pub(crate) async fn put_note(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath((runtime_id, room_id, key)): ApiPath<(Uuid, Uuid, String)>,
    ApiJson(body): ApiJson<NoteWrite>,
) -> Result<Json<Note>, ApiError> {
    require_agent_writer(&auth)?;
    validate_note_key(&key)
        .map_err(|e| ApiError::new(ErrorCode::InvalidArgument, e.to_string()))?;
    let note = NoteInput {
        key,
        text: body.text,
        version: body.version,
        source_message_ids: body.source_message_ids,
    };
    Ok(Json(
        state
            .store
            .put_note(&auth.0.caller(), runtime_id, room_id, note)
            .await?,
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NotesQuery {
    limit: Option<u32>,
    /// The key of the last note of the previous page (its `next`).
    after: Option<String>,
}

pub(crate) async fn notes(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath((runtime_id, room_id)): ApiPath<(Uuid, Uuid)>,
    ApiQuery(query): ApiQuery<NotesQuery>,
) -> Result<Json<NoteList>, ApiError> {
    auth.require(Scope::Read)?;
    let (notes, next) = state
        .store
        .notes(
            &auth.0.caller(),
            runtime_id,
            room_id,
            query.limit,
            query.after.as_deref(),
        )
        .await?;
    Ok(Json(NoteList { notes, next }))
}

pub(crate) async fn socket_check(
    state: &AppState,
    auth: &Auth,
    runtime_id: Uuid,
) -> Result<(), ApiError> {
    auth.require(Scope::Read)?;
    state.store.runtime(&auth.0.caller(), runtime_id).await?;
    Ok(())
}
