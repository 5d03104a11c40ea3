//! The external runners as worker [`Handler`]s: a job becomes a
//! [`HandlerJob`], a [`HandlerOutcome`] a result or a failed attempt.

use relayger_core::wire::JobResult;

use super::{HandlerJob, HandlerOutcome};
use crate::{Handler, HandlerError, HandlerFuture, HandlerInput, HandlerOutput};

/// What an external handler receives for `input`: the question's deadline
/// is passed on, the claim's time (deadline already folded in) is enforced.
fn handler_job(input: HandlerInput) -> HandlerJob {
    HandlerJob {
        deadline: input.message.deadline,
        message: input.message,
        opened: input.opened,
        attempt: input.attempt,
        job_key: input.job_key,
        runtime_id: input.runtime_id,
        timeout_ms: input.timeout_ms,
    }
}

/// A completed answer, or a failed attempt with the runner's or the
/// handler's own reason (and whatever usage it reported).
fn handler_result(outcome: HandlerOutcome) -> Result<HandlerOutput, HandlerError> {
    match outcome {
        HandlerOutcome::Completed(JobResult {
            error: Some(code),
            usage,
            ..
        }) => Err(HandlerError { code, usage }),
        HandlerOutcome::Completed(JobResult {
            reply,
            skip,
            note,
            usage,
            error: None,
        }) => Ok(HandlerOutput {
            reply,
            skip,
            note,
            usage,
        }),
        HandlerOutcome::Failed { reason, usage } => Err(HandlerError {
            code: reason,
            usage,
        }),
    }
}

/// A runner whose every job is a child process of its own (`--handler
/// file.mjs`: a fresh Node worker thread; `--process worker.json`: the
/// operator's program), which it stops itself on timeout or cancellation.
macro_rules! child_process_handler {
    ($runner:ty) => {
        impl Handler for $runner {
            fn handle(&self, input: HandlerInput) -> HandlerFuture<'_> {
                Box::pin(async move {
                    let cancel = input.cancel.clone();
                    let job = handler_job(input);
                    handler_result(self.run(&job, cancel).await)
                })
            }

            fn stops_itself(&self) -> bool {
                true
            }
        }
    };
}

#[cfg(feature = "node")]
child_process_handler!(super::NodeModuleHandler);
#[cfg(feature = "process")]
child_process_handler!(super::ProcessHandler);

#[cfg(test)]
mod tests {
    use relayger_core::wire::Usage;

    use super::*;

    #[test]
    fn outcomes_become_results() {
        let usage = Some(Usage {
            model_calls: 1,
            ..Usage::default()
        });
        let answered = HandlerOutcome::Completed(JobResult {
            reply: Some("hi".into()),
            usage,
            ..JobResult::default()
        });
        assert_eq!(
            handler_result(answered),
            Ok(HandlerOutput {
                reply: Some("hi".into()),
                usage,
                ..HandlerOutput::default()
            })
        );
        let reported = HandlerOutcome::Completed(JobResult {
            error: Some("model_unavailable".into()),
            usage,
            ..JobResult::default()
        });
        assert_eq!(
            handler_result(reported),
            Err(HandlerError {
                code: "model_unavailable".into(),
                usage
            })
        );
        let failed = HandlerOutcome::Failed {
            reason: "timeout".into(),
            usage: None,
        };
        assert_eq!(handler_result(failed), Err(HandlerError::new("timeout")));
    }
}
