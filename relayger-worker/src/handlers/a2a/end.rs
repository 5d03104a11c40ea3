//! How a remote task's end becomes the handler's result. The end itself
//! (the answer's text, or a code-first failure reason) is relayger-core's
//! rule ([`relayger_core::a2a::remote_end`]); `usage` stays unknown: the
//! remote agent's model calls are not ours to see.

pub(super) use relayger_core::a2a::{
    RemoteEnd, message_end as end_of_message, remote_end as end_of_task,
};
use relayger_core::wire::MAX_TEXT_BYTES;

use crate::{HandlerError, HandlerOutput};

/// The handler's result for `end`. An answer without text is a failed
/// attempt (`a2a_no_text`); one longer than a message may be is skipped
/// (`reply_too_large`), like the builtins'.
pub(super) fn result(end: RemoteEnd) -> Result<HandlerOutput, HandlerError> {
    match end {
        RemoteEnd::Answered(Some(text)) if text.len() > MAX_TEXT_BYTES => {
            Ok(HandlerOutput::skip("reply_too_large"))
        }
        RemoteEnd::Answered(Some(text)) if !text.trim().is_empty() => {
            Ok(HandlerOutput::reply(text))
        }
        RemoteEnd::Answered(_) => Err(HandlerError::new("a2a_no_text")),
        RemoteEnd::Unanswered(reason) => Err(HandlerError::new(reason)),
    }
}
