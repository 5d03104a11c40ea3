//! Table-driven tests of worker.json parsing, the credential rule, the
//! request line and response validation.

mod config;
mod context_configs;
mod credentials;
mod request_line;
mod responses;

use serde_json::json;

use super::*;
use crate::ids::IdentityNumber;
use crate::wire::{IdentityKind, IdentityRef, MAX_TEXT_BYTES};

fn config(text: &str) -> Result<ProcessConfig, ProcessConfigError> {
    ProcessConfig::parse(text)
}

fn field_of(error: &ProcessConfigError) -> &str {
    match error {
        ProcessConfigError::Field { field, .. } => field,
        _ => "",
    }
}

fn response(text: &str) -> Result<JobResult, ResponseError> {
    parse_response_output(text.as_bytes(), DEFAULT_MAX_RESPONSE_BYTES)
}

const SOURCE: &str = "0195f3b2-7c1e-7d2a-9c4b-3e2f1a0b9c8d";
