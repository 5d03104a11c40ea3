//! Finishes that are ready together go together: one task sends every
//! finish queued while its previous request was out in one
//! `POST …/finishes`, and hands each job its own result. There is no timer:
//! a lone finish goes at once (on the job's own finish route), and under
//! load a batch grows by itself to what piled up during one round trip.

use relayger_core::wire::{
    FinishBatchRequest, FinishBatchResponse, FinishRequest, FinishResponse, JobFinish,
    MAX_FINISHES_PER_BATCH,
};
use relayger_core::{ErrorCode, ErrorEnvelope};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::client::{Client, ClientError};

type Answer = oneshot::Sender<Result<FinishResponse, ClientError>>;

/// The queue to the finisher task (which ends when this is dropped).
pub(crate) struct Finisher {
    queue: mpsc::UnboundedSender<(JobFinish, Answer)>,
}

impl Finisher {
    pub(crate) fn start(client: Client, runtime_id: Uuid) -> Finisher {
        let (queue, ready) = mpsc::unbounded_channel();
        tokio::spawn(send_ready(client, runtime_id, ready));
        Finisher { queue }
    }

    /// Sends one job's finish with whatever else is ready, and returns what
    /// the server answered for this job (as the single finish route would).
    pub(crate) async fn finish(
        &self,
        job_id: Uuid,
        body: &FinishRequest,
    ) -> Result<FinishResponse, ClientError> {
        let (answer, answered) = oneshot::channel();
        let finish = JobFinish {
            job_id,
            owner: body.owner.clone(),
            version: body.version,
            result: body.result.clone(),
        };
        if self.queue.send((finish, answer)).is_err() {
            return Err(unavailable("the finisher stopped"));
        }
        answered
            .await
            .unwrap_or_else(|_| Err(unavailable("the finisher stopped")))
    }
}

/// One request at a time, each carrying everything queued meanwhile.
async fn send_ready(
    client: Client,
    runtime_id: Uuid,
    mut ready: mpsc::UnboundedReceiver<(JobFinish, Answer)>,
) {
    let mut batch = Vec::new();
    while ready.recv_many(&mut batch, MAX_FINISHES_PER_BATCH).await > 0 {
        let (mut finishes, answers): (Vec<JobFinish>, Vec<_>) =
            std::mem::take(&mut batch).into_iter().unzip();
        let outcomes = if finishes.len() == 1 {
            let JobFinish {
                job_id,
                owner,
                version,
                result,
            } = finishes.remove(0);
            let body = FinishRequest {
                owner,
                version,
                result,
            };
            vec![client.runtimes().finish(runtime_id, job_id, &body).await]
        } else {
            let jobs: Vec<Uuid> = finishes.iter().map(|finish| finish.job_id).collect();
            let sent = client
                .runtimes()
                .finish_batch(runtime_id, &FinishBatchRequest { finishes })
                .await;
            per_job(&jobs, sent)
        };
        for (answer, outcome) in answers.into_iter().zip(outcomes) {
            // A job that stopped waiting (its worker is stopping) is gone.
            let _ = answer.send(outcome);
        }
    }
}

/// Each job's result, in the order of `jobs`.
fn per_job(
    jobs: &[Uuid],
    sent: Result<FinishBatchResponse, ClientError>,
) -> Vec<Result<FinishResponse, ClientError>> {
    let response = match sent {
        Ok(response) => response,
        Err(err) => return jobs.iter().map(|_| Err(copy_of(&err))).collect(),
    };
    jobs.iter()
        .map(|job| {
            let found = response.results.iter().find(|result| result.job_id == *job);
            match found {
                Some(result) => match (&result.finished, &result.error) {
                    (Some(finished), _) => Ok(finished.clone()),
                    (None, Some(error)) => Err(ClientError::Api {
                        status: error.code.http_status(),
                        envelope: ErrorEnvelope {
                            error: error.clone(),
                        },
                    }),
                    (None, None) => Err(unreadable("a result without `finished` or `error`")),
                },
                None => Err(unreadable("no result for the job")),
            }
        })
        .collect()
}

/// The request's error for each of its jobs. A transport error cannot be
/// copied: each job gets a 503 `unavailable` with its text, which a job
/// treats the same way (transient: sent again).
fn copy_of(err: &ClientError) -> ClientError {
    match err {
        ClientError::Api { status, envelope } => ClientError::Api {
            status: *status,
            envelope: envelope.clone(),
        },
        ClientError::UnexpectedResponse {
            status,
            reason,
            excerpt,
        } => ClientError::UnexpectedResponse {
            status: *status,
            reason: reason.clone(),
            excerpt: excerpt.clone(),
        },
        ClientError::InvalidArgument(text) => ClientError::InvalidArgument(text.clone()),
        other if other.is_transient() => unavailable(&other.to_string()),
        other => ClientError::InvalidArgument(other.to_string()),
    }
}

fn unavailable(message: &str) -> ClientError {
    ClientError::Api {
        status: ErrorCode::Unavailable.http_status(),
        envelope: ErrorEnvelope::new(ErrorCode::Unavailable, message),
    }
}

fn unreadable(reason: &str) -> ClientError {
    ClientError::UnexpectedResponse {
        status: 200,
        reason: reason.to_owned(),
        excerpt: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use relayger_core::ErrorBody;
    use relayger_core::wire::{FinishOutcome, JobFinishResult};

    use super::*;

    #[test]
    fn each_job_gets_its_own_result_whatever_the_order() {
        let (a, b, c) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let ok = FinishResponse {
            outcome: FinishOutcome::Handled,
            reply_message_id: None,
            retry_at: None,
        };
        let response = FinishBatchResponse {
            results: vec![
                JobFinishResult {
                    job_id: b,
                    finished: None,
                    error: Some(ErrorBody {
                        code: ErrorCode::LeaseLost,
                        message: "lost".into(),
                        details: None,
                    }),
                },
                JobFinishResult {
                    job_id: a,
                    finished: Some(ok.clone()),
                    error: None,
                },
            ],
        };
        let results = per_job(&[a, b, c], Ok(response));
        assert_eq!(results[0].as_ref().expect("a"), &ok);
        let lost = results[1].as_ref().expect_err("b");
        assert_eq!(lost.code(), Some(ErrorCode::LeaseLost));
        assert!(!lost.is_transient());
        assert!(matches!(
            results[2],
            Err(ClientError::UnexpectedResponse { .. })
        ));
    }

    #[test]
    fn a_request_error_is_every_job_s_and_stays_transient() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let results = per_job(&[a, b], Err(unavailable("down")));
        assert_eq!(results.len(), 2);
        for result in results {
            let err = result.expect_err("error");
            assert!(err.is_transient());
            assert_eq!(err.code(), Some(ErrorCode::Unavailable));
        }
    }
}
