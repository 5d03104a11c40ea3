//! The contract between the worker and an operator's own handler program.
//!
//! `worker run --process worker.json` starts one process per job with the
//! executable and arguments the operator wrote in `worker.json`; a message
//! can never choose them. The process reads one request line
//! ([`ProcessRequest`]) and must print exactly one response line, read by
//! [`parse_response_output`]. The Node module handler returns the same
//! object shape from `handle`, read by [`parse_result_value`], so both kinds
//! of handler are held to one set of rules.
//!
//! Both files are hand-written and a mistake in either should fail loudly
//! with the field named: unknown, mistyped, `null`, out-of-range and
//! duplicate fields are all errors. The full ABI is in `docs/process-abi.md`.
//!
//! [`is_credential_variable`] is the one list of environment variables a
//! handler never receives, whatever the operator allowed.

use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::canonical::{StrictJsonError, parse_strict_object};
use crate::job_result::InvalidResult;
use crate::sealed::SealedContent;
use crate::wire::{JobResult, MessageEnvelope, NoteInput, Timestamp, Usage};

mod context;

pub use context::{
    ContextConfig, ContextMessage, NotesContextConfig, RequestContext, ThreadContext,
    ThreadContextConfig,
};

const EXECUTABLE: &str = "executable";
const ARGV: &str = "argv";
const CWD: &str = "cwd";
const ENV: &str = "env";
const MAX_REQUEST_BYTES: &str = "maxRequestBytes";
const MAX_RESPONSE_BYTES: &str = "maxResponseBytes";
const MAX_STDERR_BYTES: &str = "maxStderrBytes";
const CONTEXT: &str = "context";
const CONFIG_FIELDS: &str =
    "executable, argv, cwd, env, maxRequestBytes, maxResponseBytes, maxStderrBytes, context";

/// Default cap on the request line (the message envelope is at most a few
/// dozen KiB even when sealed, so this leaves plenty of room).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 1024 * 1024;
/// Allowed `maxRequestBytes`, inclusive.
pub const MAX_REQUEST_BYTES_RANGE: (usize, usize) = (4096, 16 * 1024 * 1024);
/// Default cap on stdout (the response line): room for a reply of
/// [`MAX_TEXT_BYTES`](crate::wire::MAX_TEXT_BYTES) plus its JSON escaping, a note and usage.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 128 * 1024;
/// Allowed `maxResponseBytes`, inclusive; the upper end is the server's
/// request body limit, which the reply has to fit into anyway.
pub const MAX_RESPONSE_BYTES_RANGE: (usize, usize) = (256, 512 * 1024);
/// Default cap on the stderr forwarded to the worker's stderr per job.
pub const DEFAULT_MAX_STDERR_BYTES: usize = 64 * 1024;
/// Allowed `maxStderrBytes`, inclusive (0 discards stderr).
pub const MAX_STDERR_BYTES_RANGE: (usize, usize) = (0, 1024 * 1024);
/// At most this many `argv` entries and `env` names.
pub const MAX_LIST_ENTRIES: usize = 256;

/// Name prefixes (compared in upper case) of variables that carry
/// credentials of Relayger, the database or a cloud store.
const CREDENTIAL_PREFIXES: [&str; 12] = [
    "RELAYGER_",
    "PG",
    "POSTGRES",
    "MYSQL_",
    "AWS_",
    "AZURE_",
    "GOOGLE_",
    "GCLOUD_",
    "GCS_",
    "S3_",
    "MINIO_",
    "B2_",
];
/// Name parts (compared in upper case) that mark a variable as a secret
/// wherever they appear.
const CREDENTIAL_PARTS: [&str; 11] = [
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "KEY",
    "CREDENTIAL",
    "PRIVATE",
    "DATABASE_URL",
    "REDIS_URL",
    "MONGODB_URI",
    "_DSN",
];
/// Name endings of variables that hold a connection string; one whose value
/// carries a password (`scheme://user:password@host`) is a credential.
const CONNECTION_SUFFIXES: [&str; 3] = ["_URL", "_URI", "_DSN"];

/// Whether a variable of this name is a credential that no handler ever
/// receives: Relayger's own (`RELAYGER_*`, which holds the profile token),
/// databases' (`DATABASE_URL`, `PG*`, `POSTGRES*`, `MYSQL_*`, `REDIS_URL`,
/// `MONGODB_URI`, `*_DSN`), cloud stores' (`AWS_*`, `AZURE_*`, `GOOGLE_*`,
/// `GCS_*`, `S3_*`, …) and anything whose name mentions a token,
/// secret, password, key, credential or private material. Case-insensitive,
/// because Windows names are.
pub fn is_credential_variable(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    CREDENTIAL_PREFIXES
        .iter()
        .any(|prefix| upper.starts_with(prefix))
        || CREDENTIAL_PARTS.iter().any(|part| upper.contains(part))
        || upper == "DSN"
}

/// [`is_credential_variable`], and also a connection string (`*_URL`,
/// `*_URI`, `*_DSN`, `DSN`) whose value carries a credential: a password in
/// its userinfo (`postgres://app:hunter2@db/app`), a token as its userinfo
/// (`https://ghp_…@github.com/…`), or a credential query parameter
/// (`?access_token=…`, `token`, `api_key`, `sig`, …). What the worker
/// applies to the values it actually has before a handler starts.
pub fn is_credential_entry(name: &str, value: &str) -> bool {
    if is_credential_variable(name) {
        return true;
    }
    let upper = name.to_ascii_uppercase();
    let connection = upper == "URL"
        || upper == "URI"
        || CONNECTION_SUFFIXES
            .iter()
            .any(|suffix| upper.ends_with(suffix));
    connection && carries_credential(value)
}

/// Prefixes of well-known token formats (GitHub, GitLab, Slack, OpenAI and
/// Stripe style, Hugging Face, npm, AWS access key ids).
const TOKEN_PREFIXES: [&str; 15] = [
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "sk-",
    "sk_",
    "hf_",
    "npm_",
    "AKIA",
];
/// Query parameter names that hold a credential wherever they appear in
/// the name (case-insensitive): `access_token`, `X-Amz-Signature`, …
const CREDENTIAL_PARAMETER_PARTS: [&str; 9] = [
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "signature",
    "apikey",
    "api_key",
    "api-key",
];
/// Query parameter names that are a credential only as a whole word.
const CREDENTIAL_PARAMETERS: [&str; 6] = ["key", "sig", "auth", "pwd", "pass", "code"];

/// Whether a URL value carries a credential: `scheme://user:password@…`, a
/// token as the userinfo, or a credential query parameter with a value.
fn carries_credential(value: &str) -> bool {
    let Some((_, rest)) = value.split_once("://") else {
        return false;
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, after) = rest.split_at(authority_end);
    let userinfo_is_secret = authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':') || looks_like_token(userinfo));
    let query = after
        .split('#')
        .next()
        .and_then(|before_fragment| before_fragment.split_once('?'))
        .map_or("", |(_, query)| query);
    userinfo_is_secret
        || query
            .split(['&', ';'])
            .filter_map(|pair| pair.split_once('='))
            .any(|(name, value)| !value.is_empty() && is_credential_parameter(name))
}

/// A userinfo with no password that is a token rather than a user name: a
/// well-known token prefix, or 20 or more characters mixing letters and
/// digits.
fn looks_like_token(userinfo: &str) -> bool {
    let long_and_mixed = userinfo.len() >= 20
        && userinfo.bytes().any(|b| b.is_ascii_digit())
        && userinfo.bytes().any(|b| b.is_ascii_alphabetic());
    long_and_mixed
        || TOKEN_PREFIXES
            .iter()
            .any(|prefix| userinfo.starts_with(prefix))
}

fn is_credential_parameter(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    CREDENTIAL_PARAMETER_PARTS
        .iter()
        .any(|part| lower.contains(part))
        || CREDENTIAL_PARAMETERS.contains(&lower.as_str())
}

/// A parsed `worker.json`. Paths are kept as written; the worker resolves
/// relative ones against the file's own directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessConfig {
    /// A path, or a bare program name looked up on `PATH`.
    pub executable: String,
    /// Arguments after the program name.
    pub argv: Vec<String>,
    /// The working directory; absent means the directory of `worker.json`.
    pub cwd: Option<String>,
    /// Names of the worker's variables passed through; all others are cleared.
    pub env: Vec<String>,
    /// Cap on the request line; a longer request fails the attempt unsent.
    pub max_request_bytes: usize,
    /// Cap on everything the process prints on stdout.
    pub max_response_bytes: usize,
    /// Stderr forwarded per job; 0 drops it.
    pub max_stderr_bytes: usize,
    /// What the worker reads for the handler and puts into the request.
    pub context: ContextConfig,
}

/// Why a `worker.json` was refused; each message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProcessConfigError {
    #[error("worker.json is not valid JSON: {message}")]
    InvalidJson { message: String },
    #[error("worker.json must be a JSON object, found {found}")]
    NotAnObject { found: &'static str },
    #[error("worker.json field `{field}`: {problem}")]
    Field { field: String, problem: String },
}

impl ProcessConfigError {
    fn field(field: &str, problem: impl Into<String>) -> Self {
        ProcessConfigError::Field {
            field: field.to_owned(),
            problem: problem.into(),
        }
    }
}

impl From<StrictJsonError> for ProcessConfigError {
    fn from(error: StrictJsonError) -> Self {
        match error {
            StrictJsonError::Syntax { message } => ProcessConfigError::InvalidJson { message },
            StrictJsonError::NotAnObject { found } => ProcessConfigError::NotAnObject { found },
            StrictJsonError::DuplicateKey { path, key } => match path.first() {
                None => ProcessConfigError::field(&key, "is given more than once"),
                Some(field) => ProcessConfigError::field(field, format!("key `{key}` repeats")),
            },
        }
    }
}

impl ProcessConfig {
    /// Parses `worker.json` strictly. Only `executable` is required.
    pub fn parse(text: &str) -> Result<ProcessConfig, ProcessConfigError> {
        let mut executable = None;
        let mut config = ProcessConfig {
            executable: String::new(),
            argv: Vec::new(),
            cwd: None,
            env: Vec::new(),
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_stderr_bytes: DEFAULT_MAX_STDERR_BYTES,
            context: ContextConfig::default(),
        };
        for (name, value) in parse_strict_object(text)? {
            match name.as_str() {
                EXECUTABLE => executable = Some(read_text(EXECUTABLE, &value)?),
                ARGV => config.argv = read_strings(ARGV, &value)?,
                CWD => config.cwd = Some(read_text(CWD, &value)?),
                ENV => config.env = read_env_names(&value)?,
                MAX_REQUEST_BYTES => {
                    config.max_request_bytes =
                        read_size(MAX_REQUEST_BYTES, &value, MAX_REQUEST_BYTES_RANGE)?;
                }
                MAX_RESPONSE_BYTES => {
                    config.max_response_bytes =
                        read_size(MAX_RESPONSE_BYTES, &value, MAX_RESPONSE_BYTES_RANGE)?;
                }
                MAX_STDERR_BYTES => {
                    config.max_stderr_bytes =
                        read_size(MAX_STDERR_BYTES, &value, MAX_STDERR_BYTES_RANGE)?;
                }
                CONTEXT => config.context = ContextConfig::parse(&value)?,
                unknown => {
                    return Err(ProcessConfigError::field(
                        unknown,
                        format!("unknown field; the fields are {CONFIG_FIELDS}"),
                    ));
                }
            }
        }
        config.executable = executable.ok_or_else(|| {
            ProcessConfigError::field(EXECUTABLE, "is required (the program to start)")
        })?;
        Ok(config)
    }
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A non-empty string without NUL (which no OS argument or path can hold).
fn read_text(field: &str, value: &Value) -> Result<String, ProcessConfigError> {
    let Value::String(text) = value else {
        return Err(ProcessConfigError::field(
            field,
            format!("must be a string, found {}", describe(value)),
        ));
    };
    if text.is_empty() {
        return Err(ProcessConfigError::field(field, "must not be empty"));
    }
    if text.contains('\0') {
        return Err(ProcessConfigError::field(field, "must not contain NUL"));
    }
    Ok(text.clone())
}

fn read_strings(field: &str, value: &Value) -> Result<Vec<String>, ProcessConfigError> {
    let Value::Array(entries) = value else {
        return Err(ProcessConfigError::field(
            field,
            format!("must be an array of strings, found {}", describe(value)),
        ));
    };
    if entries.len() > MAX_LIST_ENTRIES {
        return Err(ProcessConfigError::field(
            field,
            format!("has {} entries, at most {MAX_LIST_ENTRIES}", entries.len()),
        ));
    }
    entries
        .iter()
        .enumerate()
        .map(|(index, entry)| match entry {
            Value::String(text) if !text.contains('\0') => Ok(text.clone()),
            Value::String(_) => Err(ProcessConfigError::field(
                field,
                format!("entry {index} must not contain NUL"),
            )),
            other => Err(ProcessConfigError::field(
                field,
                format!("entry {index} must be a string, found {}", describe(other)),
            )),
        })
        .collect()
}

fn read_env_names(value: &Value) -> Result<Vec<String>, ProcessConfigError> {
    let names = read_strings(ENV, value)?;
    for (index, name) in names.iter().enumerate() {
        let mut bytes = name.bytes();
        let well_formed = bytes
            .next()
            .is_some_and(|first| first.is_ascii_alphabetic() || first == b'_')
            && bytes.all(|byte| byte.is_ascii_alphanumeric() || byte == b'_');
        if !well_formed {
            return Err(ProcessConfigError::field(
                ENV,
                format!("{name:?} is not a variable name (letters, digits and `_`)"),
            ));
        }
        if is_credential_variable(name) {
            return Err(ProcessConfigError::field(
                ENV,
                format!(
                    "`{name}` looks like a credential and is never passed to a handler; \
                     remove it (give the handler its own, narrower secret some other way)"
                ),
            ));
        }
        if names[..index].contains(name) {
            return Err(ProcessConfigError::field(
                ENV,
                format!("`{name}` is listed more than once"),
            ));
        }
    }
    Ok(names)
}

fn read_size(
    field: &str,
    value: &Value,
    (min, max): (usize, usize),
) -> Result<usize, ProcessConfigError> {
    value
        .as_u64()
        .and_then(|number| usize::try_from(number).ok())
        .filter(|number| (min..=max).contains(number))
        .ok_or_else(|| {
            ProcessConfigError::field(field, format!("must be an integer from {min} to {max}"))
        })
}

/// The one request line a process reads: `{message, opened?, attempt,
/// jobKey, runtimeId, deadline?, timeoutMs, context?}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessRequest<'a> {
    pub message: &'a MessageEnvelope,
    /// The opened content of a sealed message the worker could open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opened: Option<&'a SealedContent>,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// The idempotency key for external work.
    pub job_key: &'a str,
    pub runtime_id: Uuid,
    /// The question's deadline, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
    /// The time this attempt has, counted from when the process starts.
    pub timeout_ms: u64,
    /// What the worker read because `worker.json` asked for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<&'a RequestContext>,
}

impl ProcessRequest<'_> {
    /// The request as the one line the process reads, newline included.
    pub fn to_line(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut line = serde_json::to_vec(self)?;
        line.push(b'\n');
        Ok(line)
    }
}

const REPLY: &str = "reply";
const SKIP: &str = "skip";
const NOTE: &str = "note";
const USAGE: &str = "usage";
const ERROR: &str = "error";
const RESULT_FIELDS: &str = "reply, skip, note, usage, error";

/// Why a handler's output was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResponseError {
    #[error("more than {max} bytes on stdout")]
    TooLarge { max: usize },
    #[error("no response line on stdout")]
    Empty,
    #[error("more than one line on stdout (print exactly one JSON line)")]
    ExtraLines,
    #[error("stdout is not UTF-8")]
    NotUtf8,
    #[error("{0}")]
    Json(StrictJsonError),
    #[error("unknown field `{0}`; the fields are {RESULT_FIELDS}")]
    UnknownField(String),
    #[error("`{field}` {problem}")]
    Field {
        field: &'static str,
        problem: String,
    },
    /// The result breaks a result rule ([`JobResult::validate`]).
    #[error("{0}")]
    Invalid(InvalidResult),
}

impl ResponseError {
    /// The failure reason for the job: snake_case kind first, then details.
    pub fn reason(&self) -> String {
        match self {
            ResponseError::TooLarge { .. } => format!("response_too_large: {self}"),
            _ => format!("invalid_output: {self}"),
        }
    }
}

/// Reads a process's whole stdout: exactly one line (a final `\n` or `\r\n`
/// is optional) holding one JSON object, at most `max_bytes` in all.
pub fn parse_response_output(stdout: &[u8], max_bytes: usize) -> Result<JobResult, ResponseError> {
    if stdout.len() > max_bytes {
        return Err(ResponseError::TooLarge { max: max_bytes });
    }
    let line = stdout
        .strip_suffix(b"\n")
        .map(|rest| rest.strip_suffix(b"\r").unwrap_or(rest))
        .unwrap_or(stdout);
    if line.is_empty() {
        return Err(ResponseError::Empty);
    }
    if line.contains(&b'\n') {
        return Err(ResponseError::ExtraLines);
    }
    let text = std::str::from_utf8(line).map_err(|_| ResponseError::NotUtf8)?;
    let members = parse_strict_object(text).map_err(ResponseError::Json)?;
    parse_result_members(members)
}

/// Reads a result that is already a JSON value (what a Node `handle`
/// returned, after `JSON.stringify`).
pub fn parse_result_value(value: Value) -> Result<JobResult, ResponseError> {
    match value {
        Value::Object(map) => parse_result_members(map.into_iter().collect()),
        other => Err(ResponseError::Json(StrictJsonError::NotAnObject {
            found: describe(&other),
        })),
    }
}

fn parse_result_members(members: Vec<(String, Value)>) -> Result<JobResult, ResponseError> {
    let mut result = JobResult::default();
    for (name, value) in members {
        match name.as_str() {
            REPLY => result.reply = Some(read_result_text(REPLY, value)?),
            SKIP => result.skip = Some(read_result_text(SKIP, value)?),
            ERROR => result.error = Some(read_result_text(ERROR, value)?),
            NOTE => result.note = Some(read_note(value)?),
            USAGE => result.usage = Some(read_usage(value)?),
            _ => return Err(ResponseError::UnknownField(name)),
        }
    }
    result.validate().map_err(ResponseError::Invalid)?;
    Ok(result)
}

fn not_null(field: &'static str, value: &Value, expected: &str) -> Result<(), ResponseError> {
    if value.is_null() {
        return Err(ResponseError::Field {
            field,
            problem: format!("must be {expected}, not null; leave the field out instead"),
        });
    }
    Ok(())
}

fn read_result_text(field: &'static str, value: Value) -> Result<String, ResponseError> {
    not_null(field, &value, "a string")?;
    match value {
        Value::String(text) => Ok(text),
        other => Err(ResponseError::Field {
            field,
            problem: format!("must be a string, found {}", describe(&other)),
        }),
    }
}

fn read_note(value: Value) -> Result<NoteInput, ResponseError> {
    not_null(
        NOTE,
        &value,
        "an object {key, text, version, sourceMessageIds?}",
    )?;
    let problem = |problem: String| ResponseError::Field {
        field: NOTE,
        problem,
    };
    serde_json::from_value(value).map_err(|e| problem(e.to_string()))
}

fn read_usage(value: Value) -> Result<Usage, ResponseError> {
    not_null(
        USAGE,
        &value,
        "an object {modelCalls, inputTokens, outputTokens}",
    )?;
    serde_json::from_value(value).map_err(|e| ResponseError::Field {
        field: USAGE,
        problem: e.to_string(),
    })
}

#[cfg(test)]
mod tests;
