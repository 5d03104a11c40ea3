//! A2A 1.0 on every agent identity: its Agent Card and its JSON-RPC
//! endpoint, as the official SDKs speak them (`relayger-core::a2a` holds
//! the types and rules, docs/a2a.md the behaviour).
//!
//! Authentication and permission stay HTTP (401/403/404 with the error
//! envelope, as on every route); what goes wrong inside a call is a
//! JSON-RPC error object in A2A's taxonomy, answered with 200 as the SDKs'
//! own servers do.

mod stream;
mod tasks;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, Uri, header};
use axum::response::{IntoResponse, Response};
use relayger_core::ErrorCode;
use relayger_core::a2a::serve::{agent_card, agent_url, public_url_from_host, version_supported};
use relayger_core::a2a::{
    A2aError, A2aMethod, AgentCard, JsonRpcCall, JsonRpcError, JsonRpcResponse, VERSION_HEADER,
};
use relayger_core::ids::IdentityNumber;
use relayger_core::wire::{Identity, IdentityKind, Scope};
use serde::Serialize;
use serde_json::Value;

use crate::extract::{ApiPath, Auth};
use crate::{ApiError, AppState};

use tasks::Asker;

/// Why a call failed: inside A2A (a JSON-RPC error, status 200) or at the
/// HTTP level (authentication, permission, a missing contact, the
/// database), which keeps Relayger's envelope.
#[derive(Debug)]
pub(crate) enum Failure {
    Rpc(JsonRpcError),
    Http(ApiError),
}

impl From<JsonRpcError> for Failure {
    fn from(error: JsonRpcError) -> Self {
        Failure::Rpc(error)
    }
}

impl From<ApiError> for Failure {
    fn from(error: ApiError) -> Self {
        Failure::Http(error)
    }
}

impl From<relayger_store::StoreError> for Failure {
    fn from(error: relayger_store::StoreError) -> Self {
        Failure::Http(error.into())
    }
}

/// A JSON-RPC answer (result or error) with status 200.
fn answer<T: Serialize>(response: JsonRpcResponse<T>) -> Response {
    Json(response).into_response()
}

fn rpc_error(id: Value, error: JsonRpcError) -> Response {
    answer(JsonRpcResponse::<Value>::failure(id, error))
}

/// The agent `number`; a person or an unknown number is 404.
async fn agent(state: &AppState, number: &IdentityNumber) -> Result<Identity, ApiError> {
    let no_agent = || ApiError::new(ErrorCode::NotFound, format!("no agent {number}"));
    match state.store.public_identity(number).await {
        Ok(identity) if identity.kind == IdentityKind::Agent => Ok(identity),
        Ok(_) => Err(no_agent()),
        Err(err) => {
            let err = ApiError::from(err);
            Err(if err.code == ErrorCode::NotFound {
                no_agent()
            } else {
                err
            })
        }
    }
}

/// The server's public base URL: `--public-url`, or else the scheme it
/// serves and the host the client named.
fn public_base(state: &AppState, uri: &Uri, headers: &HeaderMap) -> Result<String, ApiError> {
    if let Some(url) = &state.config.public_url {
        return Ok(url.clone());
    }
    let host = uri
        .authority()
        .map(|authority| authority.as_str().to_owned())
        .or_else(|| {
            headers
                .get(header::HOST)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned)
        })
        .unwrap_or_default();
    public_url_from_host(state.config.tls.is_some(), &host).ok_or_else(|| {
        ApiError::new(
            ErrorCode::InvalidArgument,
            "the request names no usable Host; the server's operator can set --public-url",
        )
    })
}

/// `GET /a2a/{number}/.well-known/agent-card.json`: the agent's card.
pub(crate) async fn card(
    State(state): State<AppState>,
    auth: Auth,
    uri: Uri,
    headers: HeaderMap,
    ApiPath(number): ApiPath<IdentityNumber>,
) -> Result<Json<AgentCard>, ApiError> {
    auth.require(Scope::Read)?;
    state
        .rate_limits
        .check_lookup(auth.0.identity.accountable_person())?;
    let agent = agent(&state, &number).await?;
    let url = agent_url(&public_base(&state, &uri, &headers)?, &number);
    Ok(Json(agent_card(
        &agent.display_name,
        &url,
        env!("CARGO_PKG_VERSION"),
    )))
}

/// `POST /a2a/{number}`: one JSON-RPC call. The route takes `read`; the
/// methods that ask or cancel also need `write`.
pub(crate) async fn rpc(
    State(state): State<AppState>,
    auth: Auth,
    headers: HeaderMap,
    ApiPath(number): ApiPath<IdentityNumber>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    auth.require(Scope::Read)?;
    let body = body.map_err(|rejection| {
        if rejection.status().as_u16() == 413 {
            ApiError::new(ErrorCode::PayloadTooLarge, "the request body is too large")
        } else {
            ApiError::new(ErrorCode::BadRequest, rejection.body_text())
        }
    })?;
    let agent = agent(&state, &number).await?;
    let value: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(e) => {
            return Ok(rpc_error(
                Value::Null,
                A2aError::ParseError.with_message(format!("the body is not JSON: {e}")),
            ));
        }
    };
    let call = match JsonRpcCall::from_value(value) {
        Ok(call) => call,
        Err((id, error)) => return Ok(rpc_error(id, error)),
    };
    let id = call.answer_id();
    let version = headers
        .get(VERSION_HEADER)
        .map(|value| value.to_str().unwrap_or_default());
    if let Some(version) = version.filter(|version| !version_supported(version)) {
        return Ok(rpc_error(
            id,
            A2aError::VersionNotSupported.with_message(format!(
                "A2A-Version {version} is not supported; this server speaks 1.0"
            )),
        ));
    }
    let Some(method) = A2aMethod::from_name(&call.method) else {
        return Ok(rpc_error(
            id,
            A2aError::MethodNotFound.with_message(format!("no method `{}`", call.method)),
        ));
    };
    let asker = Asker::new(state, auth, agent);
    match dispatch(asker, method, &call).await {
        Ok(response) => Ok(response),
        Err(Failure::Rpc(error)) => Ok(rpc_error(id, error)),
        Err(Failure::Http(error)) => Err(error),
    }
}

async fn dispatch(
    asker: Asker,
    method: A2aMethod,
    call: &JsonRpcCall,
) -> Result<Response, Failure> {
    let id = call.answer_id();
    Ok(match method {
        A2aMethod::SendMessage => answer(JsonRpcResponse::success(
            id,
            asker.send(call.params()?).await?,
        )),
        A2aMethod::SendStreamingMessage => stream::send(asker, id, call.params()?).await?,
        A2aMethod::GetTask => answer(JsonRpcResponse::success(
            id,
            asker.get(call.params()?).await?,
        )),
        A2aMethod::ListTasks => answer(JsonRpcResponse::success(
            id,
            asker.list(call.params()?).await?,
        )),
        A2aMethod::CancelTask => answer(JsonRpcResponse::success(
            id,
            asker.cancel(call.params()?).await?,
        )),
        A2aMethod::SubscribeToTask => stream::subscribe(asker, id, call.params()?).await?,
        A2aMethod::CreateTaskPushNotificationConfig
        | A2aMethod::GetTaskPushNotificationConfig
        | A2aMethod::ListTaskPushNotificationConfigs
        | A2aMethod::DeleteTaskPushNotificationConfig => {
            return Err(A2aError::PushNotificationNotSupported
                .with_message(
                    "push notifications are not offered: stream (SendStreamingMessage) or poll (GetTask)",
                )
                .into());
        }
        A2aMethod::GetExtendedAgentCard => {
            return Err(A2aError::ExtendedAgentCardNotConfigured
                .with_message("this agent has no extended card")
                .into());
        }
    })
}
