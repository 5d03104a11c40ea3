//! `context` of `worker.json`: the worker reads the job's thread and the
//! runtime's notes on the room with its own client, so the process handler
//! gets them in its request line without ever holding the token.

use relayger_core::process_abi::{ContextConfig, RequestContext, ThreadContext};

use super::{HandlerJob, one_line};
use crate::client::{Client, ThreadQuery};

/// Reads what `config` asks for around `job`. A sealed thread message is
/// opened with the client's key (the agent's): the handler gets its content
/// as `opened`, or `openError` with the reason it stays closed. The error is
/// the failure reason of the attempt (`context_failed: …`), retried like any
/// other.
pub(super) async fn read_context(
    client: &Client,
    config: &ContextConfig,
    job: &HandlerJob,
) -> Result<RequestContext, String> {
    let room = job.message.conversation_id;
    let failed = |what: &str, error: crate::ClientError| {
        format!("context_failed: {what}: {}", one_line(&error.to_string()))
    };
    let thread = match config.thread {
        None => None,
        Some(thread) => {
            let query = ThreadQuery {
                after: None,
                limit: thread.limit,
                max_bytes: thread.max_bytes,
            };
            let page = client
                .thread(room, job.message.message_id, query)
                .await
                .map_err(|error| failed("thread", error))?;
            let mut messages = Vec::with_capacity(page.messages.len());
            for envelope in page.messages {
                messages.push(client.open_message(envelope).await);
            }
            Some(ThreadContext {
                messages,
                next: page.next,
            })
        }
    };
    let notes = match config.notes {
        None => None,
        Some(notes) => Some(
            client
                .runtimes()
                .notes(job.runtime_id, room, notes.limit)
                .await
                .map_err(|error| failed("notes", error))?,
        ),
    };
    Ok(RequestContext { thread, notes })
}
