//! Tool arguments: a `Parameters` wrapper that gives the tool its input
//! schema like rmcp's own, but turns arguments that do not fit the schema
//! into a tool error with code `invalid_argument` (which the assistant sees
//! and can correct) rather than a JSON-RPC protocol error.

use std::borrow::Cow;

use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::tool::ToolCallContext;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::error::CliError;

/// A tool's arguments, or why they do not fit its schema.
#[derive(Debug)]
pub(super) struct Parameters<T>(pub(super) Result<T, CliError>);

impl<T: JsonSchema> JsonSchema for Parameters<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

impl<S, T: DeserializeOwned> FromContextPart<ToolCallContext<'_, S>> for Parameters<T> {
    fn from_context_part(context: &mut ToolCallContext<S>) -> Result<Self, rmcp::ErrorData> {
        let arguments = context.arguments.take().unwrap_or_default();
        Ok(Parameters(
            serde_json::from_value(serde_json::Value::Object(arguments))
                .map_err(|err| CliError::invalid(format!("bad arguments: {err}"))),
        ))
    }
}
