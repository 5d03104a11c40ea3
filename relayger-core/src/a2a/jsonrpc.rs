//! JSON-RPC 2.0 as A2A uses it: the request and response envelopes, the
//! method names of A2A 1.0 and its error taxonomy (codes, and the
//! `google.rpc.ErrorInfo` reason the SDKs read from `error.data`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The `jsonrpc` member of every request and response.
pub const JSONRPC_VERSION: &str = "2.0";
/// The `@type` of the error detail naming A2A's reason.
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";
/// The `domain` of that detail.
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";

/// The methods of A2A 1.0's JSON-RPC binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum A2aMethod {
    SendMessage,
    SendStreamingMessage,
    GetTask,
    ListTasks,
    CancelTask,
    SubscribeToTask,
    CreateTaskPushNotificationConfig,
    GetTaskPushNotificationConfig,
    ListTaskPushNotificationConfigs,
    DeleteTaskPushNotificationConfig,
    GetExtendedAgentCard,
}

impl A2aMethod {
    pub const ALL: [A2aMethod; 11] = [
        A2aMethod::SendMessage,
        A2aMethod::SendStreamingMessage,
        A2aMethod::GetTask,
        A2aMethod::ListTasks,
        A2aMethod::CancelTask,
        A2aMethod::SubscribeToTask,
        A2aMethod::CreateTaskPushNotificationConfig,
        A2aMethod::GetTaskPushNotificationConfig,
        A2aMethod::ListTaskPushNotificationConfigs,
        A2aMethod::DeleteTaskPushNotificationConfig,
        A2aMethod::GetExtendedAgentCard,
    ];

    /// The method's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            A2aMethod::SendMessage => "SendMessage",
            A2aMethod::SendStreamingMessage => "SendStreamingMessage",
            A2aMethod::GetTask => "GetTask",
            A2aMethod::ListTasks => "ListTasks",
            A2aMethod::CancelTask => "CancelTask",
            A2aMethod::SubscribeToTask => "SubscribeToTask",
            A2aMethod::CreateTaskPushNotificationConfig => "CreateTaskPushNotificationConfig",
            A2aMethod::GetTaskPushNotificationConfig => "GetTaskPushNotificationConfig",
            A2aMethod::ListTaskPushNotificationConfigs => "ListTaskPushNotificationConfigs",
            A2aMethod::DeleteTaskPushNotificationConfig => "DeleteTaskPushNotificationConfig",
            A2aMethod::GetExtendedAgentCard => "GetExtendedAgentCard",
        }
    }

    /// The method named `name` (exactly as spelled), if A2A 1.0 has it.
    pub fn from_name(name: &str) -> Option<A2aMethod> {
        A2aMethod::ALL
            .into_iter()
            .find(|method| method.as_str() == name)
    }

    /// Whether the answer is an SSE stream rather than one JSON response.
    pub fn streams(self) -> bool {
        matches!(
            self,
            A2aMethod::SendStreamingMessage | A2aMethod::SubscribeToTask
        )
    }
}

/// A2A's errors as JSON-RPC error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum A2aError {
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    InternalError,
    TaskNotFound,
    TaskNotCancelable,
    PushNotificationNotSupported,
    UnsupportedOperation,
    ContentTypeNotSupported,
    InvalidAgentResponse,
    ExtendedAgentCardNotConfigured,
    ExtensionSupportRequired,
    VersionNotSupported,
}

impl A2aError {
    pub const ALL: [A2aError; 14] = [
        A2aError::ParseError,
        A2aError::InvalidRequest,
        A2aError::MethodNotFound,
        A2aError::InvalidParams,
        A2aError::InternalError,
        A2aError::TaskNotFound,
        A2aError::TaskNotCancelable,
        A2aError::PushNotificationNotSupported,
        A2aError::UnsupportedOperation,
        A2aError::ContentTypeNotSupported,
        A2aError::InvalidAgentResponse,
        A2aError::ExtendedAgentCardNotConfigured,
        A2aError::ExtensionSupportRequired,
        A2aError::VersionNotSupported,
    ];

    /// The JSON-RPC error code.
    pub fn code(self) -> i64 {
        match self {
            A2aError::ParseError => -32700,
            A2aError::InvalidRequest => -32600,
            A2aError::MethodNotFound => -32601,
            A2aError::InvalidParams => -32602,
            A2aError::InternalError => -32603,
            A2aError::TaskNotFound => -32001,
            A2aError::TaskNotCancelable => -32002,
            A2aError::PushNotificationNotSupported => -32003,
            A2aError::UnsupportedOperation => -32004,
            A2aError::ContentTypeNotSupported => -32005,
            A2aError::InvalidAgentResponse => -32006,
            A2aError::ExtendedAgentCardNotConfigured => -32007,
            A2aError::ExtensionSupportRequired => -32008,
            A2aError::VersionNotSupported => -32009,
        }
    }

    /// The error with this code, if A2A names it.
    pub fn from_code(code: i64) -> Option<A2aError> {
        A2aError::ALL.into_iter().find(|error| error.code() == code)
    }

    /// The `google.rpc.ErrorInfo` reason.
    pub fn reason(self) -> &'static str {
        match self {
            A2aError::ParseError => "PARSE_ERROR",
            A2aError::InvalidRequest => "INVALID_REQUEST",
            A2aError::MethodNotFound => "METHOD_NOT_FOUND",
            A2aError::InvalidParams => "INVALID_PARAMS",
            A2aError::InternalError => "INTERNAL_ERROR",
            A2aError::TaskNotFound => "TASK_NOT_FOUND",
            A2aError::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            A2aError::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            A2aError::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            A2aError::ContentTypeNotSupported => "CONTENT_TYPE_NOT_SUPPORTED",
            A2aError::InvalidAgentResponse => "INVALID_AGENT_RESPONSE",
            A2aError::ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            A2aError::ExtensionSupportRequired => "EXTENSION_SUPPORT_REQUIRED",
            A2aError::VersionNotSupported => "VERSION_NOT_SUPPORTED",
        }
    }

    /// The error object with `message`.
    pub fn with_message(self, message: impl Into<String>) -> JsonRpcError {
        JsonRpcError {
            code: self.code(),
            message: message.into(),
            data: Some(json!([{
                "@type": ERROR_INFO_TYPE,
                "reason": self.reason(),
                "domain": ERROR_DOMAIN,
            }])),
        }
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonRpcError {
    pub code: i64,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl JsonRpcError {
    /// The A2A error this is, by its code.
    pub fn kind(&self) -> Option<A2aError> {
        A2aError::from_code(self.code)
    }
}

/// A JSON-RPC response: `result` or `error`, with the request's `id`
/// (`null` when the request's id could not be read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonRpcResponse<T> {
    pub jsonrpc: String,
    #[serde(default)]
    pub id: Value,
    #[serde(default = "none", skip_serializing_if = "Option::is_none")]
    pub result: Option<T>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<JsonRpcError>,
}

fn none<T>() -> Option<T> {
    None
}

impl<T> JsonRpcResponse<T> {
    pub fn success(id: Value, result: T) -> JsonRpcResponse<T> {
        JsonRpcResponse {
            jsonrpc: JSONRPC_VERSION.to_owned(),
            id,
            result: Some(result),
            error: None,
        }
    }

    pub fn failure(id: Value, error: JsonRpcError) -> JsonRpcResponse<T> {
        JsonRpcResponse {
            jsonrpc: JSONRPC_VERSION.to_owned(),
            id,
            result: None,
            error: Some(error),
        }
    }
}

/// A JSON-RPC request as read from a body, before its params are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonRpcCall {
    pub jsonrpc: String,
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
    /// A string or a number; `None` for a notification (which A2A has no
    /// use for: it is answered like any request, with `id: null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
}

impl JsonRpcCall {
    /// A request for `method` with `params`.
    pub fn new(id: Value, method: A2aMethod, params: Value) -> JsonRpcCall {
        JsonRpcCall {
            jsonrpc: JSONRPC_VERSION.to_owned(),
            method: method.as_str().to_owned(),
            params: Some(params),
            id: Some(id),
        }
    }

    /// Reads a parsed body as a request, as JSON-RPC 2.0 defines one: an
    /// object with `"jsonrpc": "2.0"`, a string `method`, an optional
    /// object `params` (A2A's params are always objects) and an `id` that
    /// is a string, a number or null. On an error, the id to answer with
    /// (when it could be read) and the error.
    pub fn from_value(value: Value) -> Result<JsonRpcCall, (Value, JsonRpcError)> {
        let Value::Object(mut object) = value else {
            return Err((
                Value::Null,
                A2aError::InvalidRequest.with_message("a JSON-RPC request is an object"),
            ));
        };
        let id = match object.remove("id") {
            None => None,
            Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(id),
            Some(_) => {
                return Err((
                    Value::Null,
                    A2aError::InvalidRequest.with_message("`id` is a string or a number"),
                ));
            }
        };
        let answer_id = id.clone().unwrap_or(Value::Null);
        let invalid = |message: &str| {
            Err((
                answer_id.clone(),
                A2aError::InvalidRequest.with_message(message),
            ))
        };
        if object.get("jsonrpc") != Some(&Value::String(JSONRPC_VERSION.to_owned())) {
            return invalid("`jsonrpc` must be \"2.0\"");
        }
        let method = match object.remove("method") {
            Some(Value::String(method)) => method,
            _ => return invalid("`method` is a string"),
        };
        let params = match object.remove("params") {
            None | Some(Value::Null) => None,
            Some(params @ Value::Object(_)) => Some(params),
            Some(_) => {
                return Err((
                    answer_id,
                    A2aError::InvalidParams.with_message("`params` is an object"),
                ));
            }
        };
        Ok(JsonRpcCall {
            jsonrpc: JSONRPC_VERSION.to_owned(),
            method,
            params,
            id,
        })
    }

    /// The id to answer with.
    pub fn answer_id(&self) -> Value {
        self.id.clone().unwrap_or(Value::Null)
    }

    /// The params read as `T`; absent params read as an empty object.
    pub fn params<T: serde::de::DeserializeOwned>(&self) -> Result<T, JsonRpcError> {
        let params = self
            .params
            .clone()
            .unwrap_or_else(|| Value::Object(Map::new()));
        serde_json::from_value(params)
            .map_err(|e| A2aError::InvalidParams.with_message(format!("invalid params: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_reasons_are_the_sdks() {
        // As `a2a.utils.errors` (Python) and `A2A_ERROR_CODE` (JavaScript)
        // spell them.
        let table = [
            (A2aError::ParseError, -32700, "PARSE_ERROR"),
            (A2aError::InvalidRequest, -32600, "INVALID_REQUEST"),
            (A2aError::MethodNotFound, -32601, "METHOD_NOT_FOUND"),
            (A2aError::InvalidParams, -32602, "INVALID_PARAMS"),
            (A2aError::InternalError, -32603, "INTERNAL_ERROR"),
            (A2aError::TaskNotFound, -32001, "TASK_NOT_FOUND"),
            (A2aError::TaskNotCancelable, -32002, "TASK_NOT_CANCELABLE"),
            (
                A2aError::PushNotificationNotSupported,
                -32003,
                "PUSH_NOTIFICATION_NOT_SUPPORTED",
            ),
            (
                A2aError::UnsupportedOperation,
                -32004,
                "UNSUPPORTED_OPERATION",
            ),
            (
                A2aError::ContentTypeNotSupported,
                -32005,
                "CONTENT_TYPE_NOT_SUPPORTED",
            ),
            (
                A2aError::InvalidAgentResponse,
                -32006,
                "INVALID_AGENT_RESPONSE",
            ),
            (
                A2aError::ExtendedAgentCardNotConfigured,
                -32007,
                "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            ),
            (
                A2aError::ExtensionSupportRequired,
                -32008,
                "EXTENSION_SUPPORT_REQUIRED",
            ),
            (
                A2aError::VersionNotSupported,
                -32009,
                "VERSION_NOT_SUPPORTED",
            ),
        ];
        assert_eq!(table.len(), A2aError::ALL.len());
        for (error, code, reason) in table {
            assert_eq!(error.code(), code, "{error:?}");
            assert_eq!(error.reason(), reason, "{error:?}");
            assert_eq!(A2aError::from_code(code), Some(error));
            let object = serde_json::to_value(error.with_message("m")).expect("json");
            assert_eq!(object["code"], code);
            assert_eq!(object["data"][0]["@type"], ERROR_INFO_TYPE);
            assert_eq!(object["data"][0]["reason"], reason);
            assert_eq!(object["data"][0]["domain"], ERROR_DOMAIN);
        }
        assert_eq!(A2aError::from_code(1), None);
    }

    #[test]
    fn method_names_round_trip() {
        for method in A2aMethod::ALL {
            assert_eq!(A2aMethod::from_name(method.as_str()), Some(method));
        }
        for name in ["message/send", "sendMessage", "", "tasks/get"] {
            assert_eq!(A2aMethod::from_name(name), None, "{name}");
        }
        let streaming: Vec<_> = A2aMethod::ALL
            .into_iter()
            .filter(|method| method.streams())
            .collect();
        assert_eq!(
            streaming,
            [A2aMethod::SendStreamingMessage, A2aMethod::SubscribeToTask]
        );
    }

    #[test]
    fn requests_are_read_as_json_rpc_defines_them() {
        type Outcome = Result<(&'static str, Value), (Value, i64)>;
        let table: [(Value, Outcome); 9] = [
            (
                json!({"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "t"}, "id": 7}),
                Ok(("GetTask", json!(7))),
            ),
            (
                json!({"jsonrpc": "2.0", "method": "GetTask", "id": "a-b"}),
                Ok(("GetTask", json!("a-b"))),
            ),
            (
                json!({"jsonrpc": "2.0", "method": "GetTask"}),
                Ok(("GetTask", Value::Null)),
            ),
            (json!([1]), Err((Value::Null, -32600))),
            (
                json!({"jsonrpc": "1.0", "method": "GetTask", "id": 1}),
                Err((json!(1), -32600)),
            ),
            (
                json!({"jsonrpc": "2.0", "method": 5, "id": 1}),
                Err((json!(1), -32600)),
            ),
            (
                json!({"jsonrpc": "2.0", "method": "GetTask", "id": {"x": 1}}),
                Err((Value::Null, -32600)),
            ),
            (
                json!({"jsonrpc": "2.0", "method": "GetTask", "params": [1], "id": 2}),
                Err((json!(2), -32602)),
            ),
            (json!({"jsonrpc": "2.0", "id": 3}), Err((json!(3), -32600))),
        ];
        for (body, expected) in table {
            let got = JsonRpcCall::from_value(body.clone())
                .map(|call| {
                    let id = call.answer_id();
                    (call.method, id)
                })
                .map_err(|(id, error)| (id, error.code));
            match (got, expected) {
                (Ok((method, id)), Ok((want_method, want_id))) => {
                    assert_eq!((method.as_str(), id), (want_method, want_id), "{body}");
                }
                (Err(got), Err(want)) => assert_eq!(got, want, "{body}"),
                (got, want) => panic!("{body}: {got:?} vs {want:?}"),
            }
        }
    }

    #[test]
    fn responses_carry_result_or_error_and_the_id() {
        let ok = JsonRpcResponse::success(json!("x"), json!({"a": 1}));
        assert_eq!(
            serde_json::to_value(&ok).expect("json"),
            json!({"jsonrpc": "2.0", "id": "x", "result": {"a": 1}})
        );
        let failed: JsonRpcResponse<Value> =
            JsonRpcResponse::failure(Value::Null, A2aError::ParseError.with_message("bad"));
        let value = serde_json::to_value(&failed).expect("json");
        assert_eq!(value["id"], Value::Null);
        assert_eq!(value["error"]["code"], -32700);
        assert!(value.get("result").is_none());
    }
}
