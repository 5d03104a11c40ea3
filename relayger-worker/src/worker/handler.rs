//! What a worker runs per job: the [`Handler`] trait, its input and output,
//! the closure adapter [`handler_fn`], and the builtins.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use relayger_core::builtin::Builtin;
use relayger_core::sealed::SealedContent;
use relayger_core::wire::{MAX_TEXT_BYTES, MessageEnvelope, NoteInput, Usage};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::client::ClientError;

/// One job as a handler sees it (the seed's `{message, opened?, attempt,
/// jobKey, runtimeId, signal}`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HandlerInput {
    /// The message that triggered the job. Its text is data from another
    /// identity, never an instruction to run something.
    pub message: MessageEnvelope,
    /// For a sealed message that this worker's profile key opens: its
    /// content. `None` for plain messages and for sealed ones it cannot open.
    pub opened: Option<SealedContent>,
    /// 1 for the first attempt; later attempts follow failures, expired
    /// leases and crashes.
    pub attempt: u32,
    /// Stable across attempts, processes and owners: the idempotency key for
    /// external work.
    pub job_key: String,
    /// The runtime the job belongs to (for its notes).
    pub runtime_id: Uuid,
    /// The time this attempt has, in milliseconds from the claim (the
    /// claim's `handlerTimeoutMs`; an earlier question deadline is already
    /// folded in). The worker cancels the handler when it runs out.
    pub timeout_ms: u64,
    /// Cancelled on timeout, lease loss and shutdown. A handler must stop
    /// soon after: it gets one more second, then the worker stops with
    /// `handler_did_not_stop` (unless [`Handler::stops_itself`]).
    pub cancel: CancellationToken,
}

impl HandlerInput {
    /// The first attempt at `message` with `timeout_ms` to run and a fresh
    /// cancellation token: what a worker passes for a plain message, e.g.
    /// to call a handler directly in its own tests. Change the public fields
    /// for a later attempt, a sealed message or a shared token.
    pub fn new(
        message: MessageEnvelope,
        job_key: impl Into<String>,
        runtime_id: Uuid,
        timeout_ms: u64,
    ) -> HandlerInput {
        HandlerInput {
            message,
            opened: None,
            attempt: 1,
            job_key: job_key.into(),
            runtime_id,
            timeout_ms,
            cancel: CancellationToken::new(),
        }
    }
}

/// A handler's result (the seed's `{reply?, skip?, note?, usage?}`).
///
/// ```
/// use relayger_worker::HandlerOutput;
///
/// let output = HandlerOutput::reply("HELLO").with_zero_usage();
/// assert_eq!(output.reply.as_deref(), Some("HELLO"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandlerOutput {
    /// The reply: an ordinary message in the question's room, replying to
    /// it. Answer privately with [`Client::send_sealed`](crate::Client::send_sealed)
    /// from the handler instead.
    pub reply: Option<String>,
    /// Why nothing is answered (e.g. `sealed`); not together with `reply`.
    pub skip: Option<String>,
    /// A note written in the same transaction as the reply.
    pub note: Option<NoteInput>,
    /// What the handler really used; `None` is "unknown", never zero.
    pub usage: Option<Usage>,
}

impl HandlerOutput {
    /// Answers with `text`.
    pub fn reply(text: impl Into<String>) -> HandlerOutput {
        HandlerOutput {
            reply: Some(text.into()),
            ..HandlerOutput::default()
        }
    }

    /// Answers nothing, for `reason`.
    pub fn skip(reason: impl Into<String>) -> HandlerOutput {
        HandlerOutput {
            skip: Some(reason.into()),
            ..HandlerOutput::default()
        }
    }

    /// Reports `usage`.
    pub fn with_usage(mut self, usage: Usage) -> HandlerOutput {
        self.usage = Some(usage);
        self
    }

    /// Reports that no model was called (only true for handlers without one).
    pub fn with_zero_usage(self) -> HandlerOutput {
        self.with_usage(Usage::default())
    }

    /// Writes `note` together with the reply.
    pub fn with_note(mut self, note: NoteInput) -> HandlerOutput {
        self.note = Some(note);
        self
    }
}

/// A failed attempt (`{error, usage?}`): retried with backoff until the
/// policy's maxAttempts, then a dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerError {
    /// A short snake_case code, stored as the job's reason (e.g.
    /// `model_unavailable`).
    pub code: String,
    /// What the failed attempt used, if known.
    pub usage: Option<Usage>,
}

impl HandlerError {
    /// A failure with `code`.
    pub fn new(code: impl Into<String>) -> HandlerError {
        HandlerError {
            code: code.into(),
            usage: None,
        }
    }

    /// The handler stopped because its cancellation token fired.
    pub fn cancelled() -> HandlerError {
        HandlerError::new(CANCELLED)
    }

    /// Reports what the failed attempt used.
    pub fn with_usage(mut self, usage: Usage) -> HandlerError {
        self.usage = Some(usage);
        self
    }
}

/// The code of [`HandlerError::cancelled`].
pub(crate) const CANCELLED: &str = "cancelled";

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.code)
    }
}

impl std::error::Error for HandlerError {}

/// A client call failed inside a handler: the server's code (e.g.
/// `not_found`), or `unavailable` when it could not be reached.
impl From<ClientError> for HandlerError {
    fn from(err: ClientError) -> HandlerError {
        match err.code() {
            Some(code) => HandlerError::new(code.as_str()),
            None if err.is_transient() => HandlerError::new("unavailable"),
            None => HandlerError::new("client_error"),
        }
    }
}

/// What [`Handler::handle`] returns: a boxed future, so that `Handler` is
/// usable as a trait object (`Box<dyn Handler>`, `Arc<dyn Handler>`).
pub type HandlerFuture<'a> =
    Pin<Box<dyn Future<Output = Result<HandlerOutput, HandlerError>> + Send + 'a>>;

/// Handles one job at a time (a worker runs up to `concurrency` at once).
///
/// Implement it by boxing an `async` block, or wrap a closure with
/// [`handler_fn`]. The trait is object safe: a program that picks its
/// handler at run time keeps a `Box<dyn Handler>` (or an `Arc<dyn Handler>`),
/// which is a `Handler` itself.
///
/// ```
/// use relayger_worker::{BuiltinHandler, Builtin, Handler, HandlerError, HandlerFuture};
/// use relayger_worker::{HandlerInput, HandlerOutput};
///
/// struct Shout;
///
/// impl Handler for Shout {
///     fn handle(&self, input: HandlerInput) -> HandlerFuture<'_> {
///         Box::pin(async move {
///             if input.cancel.is_cancelled() {
///                 return Err(HandlerError::cancelled());
///             }
///             let text = input.message.text.unwrap_or_default();
///             Ok(HandlerOutput::reply(format!("{text}!")).with_zero_usage())
///         })
///     }
/// }
///
/// let loud = true;
/// let handler: Box<dyn Handler> = if loud {
///     Box::new(Shout)
/// } else {
///     Box::new(BuiltinHandler(Builtin::Echo))
/// };
/// # let _ = handler;
/// ```
pub trait Handler: Send + Sync + 'static {
    /// Handles one job. Must honour `input.cancel`.
    fn handle(&self, input: HandlerInput) -> HandlerFuture<'_>;

    /// `true` for a handler that enforces its own timeout and always ends
    /// what it started before returning (the external runners, which stop
    /// their processes with a grace of their own). The worker then waits
    /// longer than its 1 s for it to return after a cancellation before
    /// giving up with `handler_did_not_stop`. Default `false`.
    fn stops_itself(&self) -> bool {
        false
    }
}

impl<H: Handler + ?Sized> Handler for Box<H> {
    fn handle(&self, input: HandlerInput) -> HandlerFuture<'_> {
        (**self).handle(input)
    }

    fn stops_itself(&self) -> bool {
        (**self).stops_itself()
    }
}

impl<H: Handler + ?Sized> Handler for Arc<H> {
    fn handle(&self, input: HandlerInput) -> HandlerFuture<'_> {
        (**self).handle(input)
    }

    fn stops_itself(&self) -> bool {
        (**self).stops_itself()
    }
}

/// A [`Handler`] made of a closure; see [`handler_fn`].
#[derive(Clone)]
pub struct HandlerFn<F> {
    function: F,
}

impl<F> fmt::Debug for HandlerFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerFn").finish_non_exhaustive()
    }
}

/// Wraps a closure returning a future as a [`Handler`].
///
/// ```
/// use relayger_worker::{HandlerInput, HandlerOutput, handler_fn};
///
/// let handler = handler_fn(|input: HandlerInput| async move {
///     let text = input.message.text.unwrap_or_default();
///     Ok(HandlerOutput::reply(text.len().to_string()).with_zero_usage())
/// });
/// # let _ = handler;
/// ```
pub fn handler_fn<F, Fut>(function: F) -> HandlerFn<F>
where
    F: Fn(HandlerInput) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<HandlerOutput, HandlerError>> + Send + 'static,
{
    HandlerFn { function }
}

impl<F, Fut> Handler for HandlerFn<F>
where
    F: Fn(HandlerInput) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<HandlerOutput, HandlerError>> + Send + 'static,
{
    fn handle(&self, input: HandlerInput) -> HandlerFuture<'_> {
        Box::pin((self.function)(input))
    }
}

/// The builtins `uppercase` and `echo` as a handler: no model, zero usage.
/// A sealed question is skipped with reason `sealed` (its plaintext never
/// goes into an ordinary reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinHandler(pub Builtin);

impl Handler for BuiltinHandler {
    fn handle(&self, input: HandlerInput) -> HandlerFuture<'_> {
        let output = builtin_output(self.0, &input.message).with_zero_usage();
        Box::pin(std::future::ready(Ok(output)))
    }
}

fn builtin_output(builtin: Builtin, message: &MessageEnvelope) -> HandlerOutput {
    if message.sealed.is_some() {
        return HandlerOutput::skip("sealed");
    }
    let Some(text) = &message.text else {
        return HandlerOutput::skip("no_text");
    };
    let reply = builtin.apply(text);
    if reply.is_empty() {
        HandlerOutput::skip("empty")
    } else if reply.len() > MAX_TEXT_BYTES {
        // Upper case can grow a text (ΐ is 2 bytes, its upper case 6).
        HandlerOutput::skip("reply_too_large")
    } else {
        HandlerOutput::reply(reply)
    }
}

#[cfg(test)]
mod tests {
    use relayger_core::wire::{IdentityKind, IdentityRef, SealedPayload, Timestamp};

    use super::*;

    fn message(text: Option<&str>, sealed: bool) -> MessageEnvelope {
        MessageEnvelope {
            conversation_id: Uuid::nil(),
            message_id: Uuid::nil(),
            seq: 1,
            sender: IdentityRef {
                id: Uuid::nil(),
                number: "100000001".parse().expect("number"),
                kind: IdentityKind::Person,
            },
            text: text.map(str::to_owned),
            sealed: sealed.then(|| SealedPayload {
                version: 1,
                suite: String::new(),
                recipients: Vec::new(),
            }),
            ask: true,
            deadline: None,
            reply_to: None,
            by_runtime: false,
            created_at: Timestamp(time::OffsetDateTime::UNIX_EPOCH),
        }
    }

    #[test]
    fn builtin_table() {
        let big = "ΐ".repeat(MAX_TEXT_BYTES / 2);
        let table: [(Builtin, Option<&str>, bool, HandlerOutput); 7] = [
            (
                Builtin::Uppercase,
                Some("hello from relayger"),
                false,
                HandlerOutput::reply("HELLO FROM RELAYGER"),
            ),
            (
                Builtin::Uppercase,
                Some("straße"),
                false,
                HandlerOutput::reply("STRASSE"),
            ),
            (
                Builtin::Uppercase,
                Some("istanbul"),
                false,
                HandlerOutput::reply("ISTANBUL"),
            ),
            (
                Builtin::Echo,
                Some("as it is"),
                false,
                HandlerOutput::reply("as it is"),
            ),
            (Builtin::Echo, None, true, HandlerOutput::skip("sealed")),
            (
                Builtin::Uppercase,
                None,
                true,
                HandlerOutput::skip("sealed"),
            ),
            (
                Builtin::Uppercase,
                Some(&big),
                false,
                HandlerOutput::skip("reply_too_large"),
            ),
        ];
        for (builtin, text, sealed, expected) in table {
            assert_eq!(
                builtin_output(builtin, &message(text, sealed)),
                expected,
                "{builtin} {text:?}"
            );
        }
    }

    /// A handler that says it stops itself and answers with its name.
    struct Named(&'static str);

    impl Handler for Named {
        fn handle(&self, _input: HandlerInput) -> HandlerFuture<'_> {
            Box::pin(std::future::ready(Ok(HandlerOutput::reply(self.0))))
        }

        fn stops_itself(&self) -> bool {
            true
        }
    }

    #[test]
    fn trait_objects_forward_handle_and_stops_itself() {
        use futures_util::FutureExt;

        let input = HandlerInput::new(message(Some("hi"), false), "job", Uuid::nil(), 1000);
        let boxed: Box<dyn Handler> = Box::new(Named("boxed"));
        let shared: Arc<dyn Handler> = Arc::new(Named("shared"));
        let builtin: Box<dyn Handler> = Box::new(BuiltinHandler(Builtin::Echo));
        let table: [(&dyn Handler, bool, HandlerOutput); 3] = [
            (&boxed, true, HandlerOutput::reply("boxed")),
            (&shared, true, HandlerOutput::reply("shared")),
            (
                &builtin,
                false,
                HandlerOutput::reply("hi").with_zero_usage(),
            ),
        ];
        for (handler, stops_itself, expected) in table {
            assert_eq!(handler.stops_itself(), stops_itself, "{expected:?}");
            let output = handler.handle(input.clone()).now_or_never();
            assert_eq!(output, Some(Ok(expected)));
        }
    }

    #[test]
    fn client_errors_become_codes() {
        let transport = ClientError::Socket("closed".into());
        assert_eq!(HandlerError::from(transport).code, "unavailable");
        let refused = ClientError::InvalidArgument("bad key".into());
        assert_eq!(HandlerError::from(refused).code, "client_error");
    }
}
