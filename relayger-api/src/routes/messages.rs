//! Sending and reading messages, threads, the mailbox.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use relayger_core::ErrorCode;
use relayger_core::history::HistoryWindow;
use relayger_core::inbox_budget::InboxBudget;
use relayger_core::sealed::{ENC_BYTES, MAX_CIPHERTEXT_BYTES};
use relayger_core::thread_budget::{
    DEFAULT_THREAD_LIMIT, DEFAULT_THREAD_MAX_BYTES, ThreadBudgetError, pack_thread,
    render_thread_body, validate_limit, validate_max_bytes,
};
use relayger_core::wire::{
    AckRequest, AckResponse, Delivery, HistoryPage, InboxResponse, MAX_ROOM_MEMBERS,
    MAX_TEXT_BYTES, MessageEnvelope, Scope, SealedPayload, SendRequest,
};
use relayger_store::{MessageBody, NewMessage};
use serde::Deserialize;
use uuid::Uuid;

use crate::extract::{ApiJson, ApiPath, ApiQuery, Auth};
use crate::{ApiError, AppState};

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::InvalidArgument, message)
}

/// Checks a send request before anything touches the database.
fn validate_send(body: SendRequest) -> Result<NewMessage, ApiError> {
    if body.to.is_some() == body.room_id.is_some() {
        return Err(invalid(
            "give exactly one of `to` (a contact's number) or `roomId`",
        ));
    }
    let message_body = match (body.text, body.sealed) {
        (Some(text), None) => {
            if text.len() > MAX_TEXT_BYTES {
                return Err(ApiError::new(
                    ErrorCode::PayloadTooLarge,
                    format!(
                        "text is {} bytes; at most {MAX_TEXT_BYTES} are allowed",
                        text.len()
                    ),
                ));
            }
            if text.is_empty() {
                return Err(invalid("text must not be empty"));
            }
            MessageBody::Text(text)
        }
        (None, Some(sealed)) => {
            if body.message_id.is_none() {
                return Err(invalid(
                    "a sealed message needs the messageId it was sealed for",
                ));
            }
            check_sealed_sizes(&sealed)?;
            MessageBody::Sealed(sealed)
        }
        _ => return Err(invalid("give exactly one of `text` or `sealed`")),
    };
    if body.deadline.is_some() && !body.ask {
        return Err(invalid(
            "a deadline needs `ask`: only questions have deadlines",
        ));
    }
    Ok(NewMessage {
        to: body.to,
        room_id: body.room_id,
        message_id: body.message_id,
        body: message_body,
        ask: body.ask,
        deadline: body.deadline.map(|t| t.0),
        reply_to: body.reply_to,
    })
}

/// The sizes a sealed payload may have, checked before anything else reads
/// it: at most one entry per possible room member (400), and no entry's
/// strings longer than the largest `enc` and ciphertext could be (413).
/// The full shape is checked against the members in the send.
fn check_sealed_sizes(sealed: &SealedPayload) -> Result<(), ApiError> {
    if sealed.recipients.len() > MAX_ROOM_MEMBERS {
        return Err(invalid(format!(
            "sealed.recipients has {} entries; a room holds at most {MAX_ROOM_MEMBERS} members",
            sealed.recipients.len()
        )));
    }
    // Padded base64 of n bytes is 4 * ceil(n / 3) characters.
    let base64_chars = |bytes: usize| bytes.div_ceil(3) * 4;
    for entry in &sealed.recipients {
        if entry.ciphertext.len() > base64_chars(MAX_CIPHERTEXT_BYTES) {
            return Err(ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!(
                    "sealed.recipients: ciphertext for {} is {} base64 characters; at most {} bytes ({} characters) are allowed",
                    entry.identity_id,
                    entry.ciphertext.len(),
                    MAX_CIPHERTEXT_BYTES,
                    base64_chars(MAX_CIPHERTEXT_BYTES)
                ),
            ));
        }
        if entry.enc.len() > base64_chars(ENC_BYTES) {
            return Err(ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!(
                    "sealed.recipients: enc for {} is {} base64 characters; it is {ENC_BYTES} bytes ({} characters)",
                    entry.identity_id,
                    entry.enc.len(),
                    base64_chars(ENC_BYTES)
                ),
            ));
        }
    }
    Ok(())
}

fn validate_sealed(
    payload: &relayger_core::wire::SealedPayload,
    members: &[Uuid],
) -> Result<(), String> {
    relayger_core::sealed::validate_shape(payload, members).map_err(|e| e.to_string())
}

pub(crate) async fn send(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(body): ApiJson<SendRequest>,
) -> Result<(StatusCode, Json<MessageEnvelope>), ApiError> {
    auth.require(Scope::Write)?;
    let new = validate_send(body)?;
    let (envelope, created) = state
        .store
        .send_message(&auth.0.caller(), new, validate_sealed)
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(envelope)))
}

pub(crate) async fn message(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath((room_id, message_id)): ApiPath<(Uuid, Uuid)>,
) -> Result<Json<MessageEnvelope>, ApiError> {
    auth.require(Scope::Read)?;
    Ok(Json(
        state
            .store
            .message(&auth.0.caller(), room_id, message_id)
            .await?,
    ))
}

/// What became of a message: each other member's state (members only).
pub(crate) async fn delivery(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath((room_id, message_id)): ApiPath<(Uuid, Uuid)>,
) -> Result<Json<Delivery>, ApiError> {
    auth.require(Scope::Read)?;
    Ok(Json(
        state
            .store
            .delivery(&auth.0.caller(), room_id, message_id)
            .await?,
    ))
}

/// The sender cancels its question; answers the delivery after it.
pub(crate) async fn cancel_question(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath((room_id, message_id)): ApiPath<(Uuid, Uuid)>,
) -> Result<Json<Delivery>, ApiError> {
    auth.require(Scope::Write)?;
    Ok(Json(
        state
            .store
            .cancel_question(&auth.0.caller(), room_id, message_id)
            .await?,
    ))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ThreadQuery {
    after: Option<i64>,
    limit: Option<u64>,
    max_bytes: Option<u64>,
}

/// The thread page, packed so the whole HTTP body fits `maxBytes`.
pub(crate) async fn thread(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath((room_id, message_id)): ApiPath<(Uuid, Uuid)>,
    ApiQuery(query): ApiQuery<ThreadQuery>,
) -> Result<Response, ApiError> {
    auth.require(Scope::Read)?;
    let budget_error = |e: ThreadBudgetError| match e {
        ThreadBudgetError::ContextItemTooLarge { .. } => {
            ApiError::new(ErrorCode::ContextItemTooLarge, e.to_string())
        }
        other => invalid(other.to_string()),
    };
    let max_bytes = match query.max_bytes {
        Some(bytes) => validate_max_bytes(bytes).map_err(budget_error)?,
        None => DEFAULT_THREAD_MAX_BYTES,
    };
    let limit = match query.limit {
        Some(limit) => validate_limit(limit).map_err(budget_error)?,
        None => DEFAULT_THREAD_LIMIT,
    };
    let after = query.after.unwrap_or(0);
    if after < 0 {
        return Err(invalid("after must be a room seq (0 or more)"));
    }
    let envelopes = state
        .store
        .thread(
            &auth.0.caller(),
            room_id,
            message_id,
            after,
            limit,
            max_bytes,
        )
        .await?;
    let more_after = envelopes.len() > limit;
    let serialized: Vec<(i64, String)> = envelopes
        .iter()
        .take(limit)
        .map(|e| serde_json::to_string(e).map(|json| (e.seq, json)))
        .collect::<Result<_, _>>()
        .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
    let items: Vec<(i64, &str)> = serialized
        .iter()
        .map(|(seq, json)| (*seq, json.as_str()))
        .collect();
    let packed = pack_thread(&items, more_after, max_bytes, limit).map_err(budget_error)?;
    let body = render_thread_body(&items, &packed);
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct HistoryQuery {
    after: Option<i64>,
    before: Option<i64>,
    limit: Option<i64>,
}

/// One page of a room's history, either way (`relayger_core::history`).
pub(crate) async fn history(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(room_id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<HistoryQuery>,
) -> Result<Json<HistoryPage>, ApiError> {
    auth.require(Scope::Read)?;
    let window = HistoryWindow::new(query.after, query.before, query.limit).map_err(invalid)?;
    let page = state
        .store
        .history(&auth.0.caller(), room_id, window)
        .await?;
    Ok(Json(page))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct InboxQuery {
    limit: Option<u32>,
    after: Option<Uuid>,
}

/// One bounded inbox page (`relayger_core::inbox_budget`).
pub(crate) async fn inbox(
    State(state): State<AppState>,
    auth: Auth,
    ApiQuery(query): ApiQuery<InboxQuery>,
) -> Result<Json<InboxResponse>, ApiError> {
    auth.require(Scope::Read)?;
    let budget = InboxBudget::new(query.limit)
        .map_err(|message| ApiError::new(ErrorCode::InvalidArgument, message))?;
    let (rooms, next) = state
        .store
        .inbox(&auth.0.caller(), query.after, budget)
        .await?;
    Ok(Json(InboxResponse { rooms, next }))
}

pub(crate) async fn ack(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(room_id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<AckRequest>,
) -> Result<Json<AckResponse>, ApiError> {
    auth.require(Scope::Write)?;
    let acked_seq = state.store.ack(&auth.0.caller(), room_id, body.seq).await?;
    Ok(Json(AckResponse { room_id, acked_seq }))
}
