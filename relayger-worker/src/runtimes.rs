//! The runtime routes (`relayger_core::wire`'s runtime table) as typed
//! calls under [`Client::runtimes`].

use relayger_core::lookup::{Candidate, JobRef, check_runtime_ref, resolve_runtime};
use relayger_core::notes::validate_note_key;
use relayger_core::wire::{
    ClaimRequest, ClaimResponse, ConfigureRequest, Done, FinishBatchRequest, FinishBatchResponse,
    FinishRequest, FinishResponse, HeartbeatResponse, JobList, JobView, LeaseRequest, LogPage,
    Note, NoteList, NoteWrite, RegisterRuntimeRequest, Runtime, RuntimeList, RuntimeStats,
};
use reqwest::Method;
use uuid::Uuid;

use crate::client::{Client, ClientError, decode};
use crate::socket::SignalSocket;

// The header of an idle claim response that counts pending contact
// requests (only for a token with the contacts scope and no room
// restriction).
use relayger_core::wire::names::CONTACT_REQUESTS_HEADER;

/// What `POST /v1/runtimes/{id}/claim` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Claim {
    /// The granted jobs, or none with `retryAt`.
    pub response: ClaimResponse,
    /// `Relayger-Contact-Requests`: pending incoming contact requests, sent
    /// with an idle claim when the token may see contacts.
    pub contact_requests: Option<u32>,
    /// The server's clock when it answered (the `Date` header), to turn
    /// `retryAt` into a duration without comparing with the local clock.
    pub server_date: Option<time::OffsetDateTime>,
}

/// The runtime calls of one [`Client`]; see [`Client::runtimes`].
#[derive(Debug, Clone, Copy)]
pub struct Runtimes<'a> {
    client: &'a Client,
}

impl Client {
    /// The runtime (persistent listener) routes: registration, claims,
    /// leases, configuration, notes, log and stats.
    ///
    /// ```no_run
    /// # async fn example(client: relayger_worker::Client, runtime: uuid::Uuid, room: uuid::Uuid)
    /// # -> Result<(), relayger_worker::ClientError> {
    /// let notes = client.runtimes().notes(runtime, room, Some(2)).await?;
    /// for note in notes {
    ///     println!("{}: {}", note.key, note.text);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn runtimes(&self) -> Runtimes<'_> {
        Runtimes { client: self }
    }
}

impl Runtimes<'_> {
    /// `POST /v1/runtimes`: registers runtime `name`, or re-attaches to it
    /// when `from` and the policy match the stored configuration (else 409
    /// `runtime_configuration_conflict`, whose `details` hold the stored
    /// configuration).
    pub async fn register(self, body: &RegisterRuntimeRequest) -> Result<Runtime, ClientError> {
        self.client.post("/v1/runtimes", body).await
    }

    /// `GET /v1/runtimes`: the agent's runtimes.
    pub async fn list(self) -> Result<RuntimeList, ClientError> {
        self.client.get("/v1/runtimes").await
    }

    /// The id of the runtime `name_or_id` names: an id, a name, or a
    /// unique start of an id (at least 4 characters), from one
    /// `GET /v1/runtimes` unless it is an id already. Nothing or several
    /// matching is a [`ClientError::Lookup`] that lists the runtimes.
    pub async fn resolve(self, name_or_id: &str) -> Result<Uuid, ClientError> {
        if let Ok(id) = Uuid::parse_str(name_or_id.trim()) {
            return Ok(id);
        }
        check_runtime_ref(name_or_id).map_err(ClientError::InvalidArgument)?;
        let list = self.list().await?;
        let candidates: Vec<Candidate<'_>> = list
            .runtimes
            .iter()
            .map(|runtime| Candidate {
                id: runtime.id,
                name: &runtime.name,
            })
            .collect();
        Ok(resolve_runtime(name_or_id, &candidates)?)
    }

    /// `GET /v1/runtimes/{id}`: one runtime with its configuration version,
    /// job counts and active leases.
    pub async fn get(self, runtime: Uuid) -> Result<Runtime, ClientError> {
        self.client.get(&format!("/v1/runtimes/{runtime}")).await
    }

    /// `DELETE /v1/runtimes/{id}`: frees the name (409 `runtime_busy` while
    /// a lease is active).
    pub async fn delete(self, runtime: Uuid) -> Result<Done, ClientError> {
        self.client
            .send_json(
                Method::DELETE,
                &format!("/v1/runtimes/{runtime}"),
                None::<&()>,
            )
            .await
    }

    /// `POST /v1/runtimes/{id}/configure`: a new policy; `body.version` must
    /// be the current configuration version (409 `version_conflict`), and no
    /// lease may be active (409 `runtime_busy`).
    pub async fn configure(
        self,
        runtime: Uuid,
        body: &ConfigureRequest,
    ) -> Result<Runtime, ClientError> {
        self.client
            .post(&format!("/v1/runtimes/{runtime}/configure"), body)
            .await
    }

    /// `POST /v1/runtimes/{id}/claim`: up to `maxJobs` leased jobs, or none
    /// with the time to look again.
    pub async fn claim(self, runtime: Uuid, body: &ClaimRequest) -> Result<Claim, ClientError> {
        let response = self
            .client
            .request(Method::POST, &format!("/v1/runtimes/{runtime}/claim"))
            .json(body)
            .send()
            .await?;
        let headers = response.headers();
        let contact_requests = headers
            .get(CONTACT_REQUESTS_HEADER)
            .and_then(|value| value.to_str().ok())
            .and_then(|text| text.trim().parse().ok());
        let server_date = headers
            .get(reqwest::header::DATE)
            .and_then(|value| value.to_str().ok())
            .and_then(|text| {
                time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc2822)
                    .ok()
            });
        Ok(Claim {
            response: decode(response).await?,
            contact_requests,
            server_date,
        })
    }

    /// `POST …/jobs/{job}/heartbeat`: renews the lease (409 `lease_lost`
    /// once it expired or was claimed again).
    pub async fn heartbeat(
        self,
        runtime: Uuid,
        job: Uuid,
        lease: &LeaseRequest,
    ) -> Result<HeartbeatResponse, ClientError> {
        self.client
            .post(
                &format!("/v1/runtimes/{runtime}/jobs/{job}/heartbeat"),
                lease,
            )
            .await
    }

    /// `POST …/jobs/{job}/finish`: reply, skip, note and usage (or an error)
    /// in one transaction. Sending the same result again returns the first
    /// outcome; another result gets 409 `fingerprint_mismatch`.
    pub async fn finish(
        self,
        runtime: Uuid,
        job: Uuid,
        body: &FinishRequest,
    ) -> Result<FinishResponse, ClientError> {
        self.client
            .post(&format!("/v1/runtimes/{runtime}/jobs/{job}/finish"), body)
            .await
    }

    /// `POST /v1/runtimes/{id}/finishes`: several finishes in one
    /// transaction, one result per job (each as [`Runtimes::finish`] would
    /// answer it).
    pub async fn finish_batch(
        self,
        runtime: Uuid,
        body: &FinishBatchRequest,
    ) -> Result<FinishBatchResponse, ClientError> {
        self.client
            .post(&format!("/v1/runtimes/{runtime}/finishes"), body)
            .await
    }

    /// `POST …/jobs/{job}/release`: gives the job back (pending again at
    /// once), as a worker that stops does.
    pub async fn release(
        self,
        runtime: Uuid,
        job: Uuid,
        lease: &LeaseRequest,
    ) -> Result<Done, ClientError> {
        self.client
            .post(&format!("/v1/runtimes/{runtime}/jobs/{job}/release"), lease)
            .await
    }

    /// `GET /v1/runtimes/{id}/dead-letters`: jobs that used up maxAttempts,
    /// newest first, every page.
    pub async fn dead_letters(self, runtime: Uuid) -> Result<JobList, ClientError> {
        crate::client::pages::all_pages(async |after| {
            self.dead_letters_page(runtime, after, None).await
        })
        .await
    }

    /// One page of [`Runtimes::dead_letters`]: after the job `after`
    /// (a page's `next`), at most `limit` (default 100, at most 500).
    pub async fn dead_letters_page(
        self,
        runtime: Uuid,
        after: Option<Uuid>,
        limit: Option<u32>,
    ) -> Result<JobList, ClientError> {
        self.client
            .get_page(
                &format!("/v1/runtimes/{runtime}/dead-letters"),
                &[],
                after,
                limit,
            )
            .await
    }

    /// `POST …/jobs/{job}/retry`: a dead letter back to pending, by hand;
    /// `job` is its jobId, its message id or its jobKey.
    pub async fn retry(
        self,
        runtime: Uuid,
        job: impl Into<JobRef>,
    ) -> Result<JobView, ClientError> {
        let segment = match job.into() {
            JobRef::Id(id) => id.to_string(),
            JobRef::Key(key) => key,
        };
        self.client
            .send_json(
                Method::POST,
                &format!("/v1/runtimes/{runtime}/jobs/{segment}/retry"),
                None::<&()>,
            )
            .await
    }

    /// `GET /v1/runtimes/{id}/log`: newest first, at most 100 records.
    pub async fn log(self, runtime: Uuid, limit: Option<u32>) -> Result<LogPage, ClientError> {
        self.client
            .get(&with_limit(&format!("/v1/runtimes/{runtime}/log"), limit))
            .await
    }

    /// `GET /v1/runtimes/{id}/stats`: claims, attempts and reported usage.
    pub async fn stats(self, runtime: Uuid) -> Result<RuntimeStats, ClientError> {
        self.client
            .get(&format!("/v1/runtimes/{runtime}/stats"))
            .await
    }

    /// `PUT /v1/runtimes/{id}/notes/{room}/{key}`: version 0 creates, an
    /// update names the current version.
    pub async fn put_note(
        self,
        runtime: Uuid,
        room: Uuid,
        key: &str,
        body: &NoteWrite,
    ) -> Result<Note, ClientError> {
        // The key is a path segment: only its URL-safe alphabet is sent.
        validate_note_key(key)
            .map_err(|err| ClientError::InvalidArgument(format!("note key `{key}`: {err}")))?;
        self.client
            .send_json(
                Method::PUT,
                &format!("/v1/runtimes/{runtime}/notes/{room}/{key}"),
                Some(body),
            )
            .await
    }

    /// `GET /v1/runtimes/{id}/notes/{room}`: the runtime's notes on one
    /// room (at most 20 a page), for a handler that wants what it noted
    /// before.
    pub async fn notes(
        self,
        runtime: Uuid,
        room: Uuid,
        limit: Option<u32>,
    ) -> Result<Vec<Note>, ClientError> {
        let list: NoteList = self
            .client
            .get(&with_limit(
                &format!("/v1/runtimes/{runtime}/notes/{room}"),
                limit,
            ))
            .await?;
        Ok(list.notes)
    }

    /// One page of a room's notes, newest first: after the note whose key is
    /// `after` (a page's `next`), at most `limit` (up to 20).
    pub async fn notes_page(
        self,
        runtime: Uuid,
        room: Uuid,
        after: Option<&str>,
        limit: Option<u32>,
    ) -> Result<NoteList, ClientError> {
        let params: Vec<(&str, String)> = after
            .map(|key| ("after", key.to_owned()))
            .into_iter()
            .collect();
        self.client
            .get_page(
                &format!("/v1/runtimes/{runtime}/notes/{room}"),
                &params,
                None,
                limit,
            )
            .await
    }

    /// `GET /v1/runtimes/{id}/socket`: content-free `inbox_changed` signals
    /// (a message in an accessible room, a new contact request).
    pub async fn socket(self, runtime: Uuid) -> Result<SignalSocket, ClientError> {
        SignalSocket::connect(self.client, &format!("/v1/runtimes/{runtime}/socket")).await
    }
}

fn with_limit(path: &str, limit: Option<u32>) -> String {
    match limit {
        Some(limit) => format!("{path}?limit={limit}"),
        None => path.to_owned(),
    }
}
