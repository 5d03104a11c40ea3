//! The typed HTTP client: one method per route of the wire table in
//! `relayger_core::wire`, the bearer token on every call, and the server's
//! error envelope turned into [`ClientError::Api`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use relayger_core::ids::IdentityNumber;
use relayger_core::sealed::KeyPair;
use relayger_core::transport::{ALLOW_INSECURE_HTTP_ENV, allowed_by_env, check_token_transport};
use relayger_core::wire::{
    AckRequest, AckResponse, AnswerRequest, Contact, ContactList, ContactNumber,
    ContactRequestView, ContactRequests, CreateAgentRequest, CreateRoomRequest, CreateTokenRequest,
    CreatedToken, Done, HealthResponse, Identity, InboxResponse, MessageEnvelope, RegisterRequest,
    RegisterResponse, Room, RoomList, SendRequest, ThreadResponse, TokenInfo, TokenList,
};
use relayger_core::{ErrorCode, ErrorEnvelope};
use reqwest::{Method, RequestBuilder, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use thiserror::Error;
use uuid::Uuid;

use crate::profile::{Profile, ProfileDir, ProfileError};
use crate::sealing::SenderKeys;

/// How long to wait for a TCP/TLS connection to the server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one request may take end to end; every route answers at once,
/// so a server that takes longer is stuck rather than busy.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How much of an unreadable response body an error quotes.
const BODY_EXCERPT_CHARS: usize = 200;

/// What a call to the server can fail with.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server answered with its error envelope
    /// `{"error":{"code","message"}}` and this HTTP status.
    #[error("{}: {}", .envelope.error.code, .envelope.error.message)]
    Api {
        /// The HTTP status (fixed per code by `ErrorCode::http_status`).
        status: u16,
        /// The server's code and message.
        envelope: ErrorEnvelope,
    },
    /// The server could not be reached, or the connection broke.
    #[error("cannot reach the server: {0}")]
    Transport(#[from] reqwest::Error),
    /// The server answered, but not with the JSON this client expects (a
    /// proxy's error page, or a server of another version).
    #[error(
        "the server answered HTTP {status} with a body this client cannot read ({reason}): {excerpt}"
    )]
    UnexpectedResponse {
        /// The HTTP status.
        status: u16,
        /// Why the body could not be read.
        reason: String,
        /// The start of the body.
        excerpt: String,
    },
    /// A local profile could not be read or written.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// A sealed message could not be prepared (no local key pair, a member
    /// without a public key, not a contact, …).
    #[error("cannot send sealed: {0}")]
    Sealing(String),
    /// A WebSocket could not be opened (network, TLS, handshake) or broke.
    /// A refusal with the server's error envelope is [`ClientError::Api`].
    #[error("socket: {0}")]
    Socket(String),
    /// A value this client refuses to send (checked before any request).
    #[error("{0}")]
    InvalidArgument(String),
}

impl ClientError {
    /// The server's error code, when it answered with its envelope.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Api { envelope, .. } => Some(envelope.error.code),
            _ => None,
        }
    }

    /// Whether the same call may succeed later without any change: the
    /// server was unreachable or restarting (transport errors, a broken
    /// socket, HTTP 5xx, 429, or a body from something other than the
    /// server, such as a proxy's error page).
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Api { status, .. } => *status >= 500 || *status == 429,
            ClientError::Transport(_) | ClientError::Socket(_) => true,
            ClientError::UnexpectedResponse { status, .. } => *status >= 500 || *status == 429,
            ClientError::Profile(_) | ClientError::Sealing(_) | ClientError::InvalidArgument(_) => {
                false
            }
        }
    }
}

/// A list answered in pages that continue after the last page's `next`.
trait Paged {
    /// The cursor of the next page, taken out (none once this is the last).
    fn take_next(&mut self) -> Option<Uuid>;
    /// Adds the items of a later page, and its cursor.
    fn extend(&mut self, page: Self);
}

impl Paged for RoomList {
    fn take_next(&mut self) -> Option<Uuid> {
        self.next.take()
    }
    fn extend(&mut self, mut page: Self) {
        self.rooms.append(&mut page.rooms);
        self.next = page.next;
    }
}

impl Paged for TokenList {
    fn take_next(&mut self) -> Option<Uuid> {
        self.next.take()
    }
    fn extend(&mut self, mut page: Self) {
        self.tokens.append(&mut page.tokens);
        self.next = page.next;
    }
}

impl Paged for ContactRequests {
    fn take_next(&mut self) -> Option<Uuid> {
        self.next.take()
    }
    fn extend(&mut self, mut page: Self) {
        self.incoming.append(&mut page.incoming);
        self.outgoing.append(&mut page.outgoing);
        self.count = page.count;
        self.next = page.next;
    }
}

/// Every page of a list, from the first, following `next`.
async fn all_pages<T: Paged, F>(mut page: impl FnMut(Option<Uuid>) -> F) -> Result<T, ClientError>
where
    F: std::future::Future<Output = Result<T, ClientError>>,
{
    let mut all = page(None).await?;
    while let Some(after) = all.take_next() {
        let more = page(Some(after)).await?;
        all.extend(more);
    }
    Ok(all)
}

/// Paging and budget for [`Client::thread`]; `None` leaves the server's
/// default (no `after`, server limit, 8192 bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadQuery {
    /// Return only messages with a room seq above this one (the previous
    /// page's `next`).
    pub after: Option<i64>,
    /// At most this many messages (the server caps it at 100).
    pub limit: Option<u32>,
    /// The HTTP JSON byte budget (512–65536).
    pub max_bytes: Option<u32>,
}

/// The local identity and key pair used to seal and open messages.
pub(crate) struct LocalKeys {
    pub(crate) identity_id: Uuid,
    pub(crate) key_pair: KeyPair,
    pub(crate) public_key: [u8; 32],
}

/// A connection to one Relayger server, optionally as one identity.
///
/// Cheap to clone: clones share the connection pool and the per-run cache of
/// senders' public keys.
///
/// ```no_run
/// # async fn example() -> Result<(), relayger_worker::ClientError> {
/// use relayger_worker::Client;
///
/// let client = Client::from_profile("receiver")?;
/// let me = client.me().await?;
/// println!("{} ({})", me.number, me.display_name);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base_url: String,
    pub(crate) token: Option<String>,
    pub(crate) keys: Option<Arc<LocalKeys>>,
    /// Senders' public keys by identity id, fetched once per client.
    pub(crate) sender_keys: Arc<SenderKeys>,
    /// Whether a token may go over plain HTTP to another machine.
    allow_insecure_http: bool,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the token or the key pair.
        f.debug_struct("Client")
            .field("base_url", &self.base_url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field(
                "identity_id",
                &self.keys.as_ref().map(|keys| keys.identity_id),
            )
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client for the server at `base_url` (e.g. `http://127.0.0.1:7070`)
    /// that sends `token` as `Authorization: Bearer`.
    ///
    /// The token is sent only over TLS or to this machine: to a plain
    /// `http://` URL of another host every call fails with
    /// [`ClientError::InvalidArgument`] before anything is sent, unless
    /// [`Client::allow_insecure_http`] (or `RELAYGER_ALLOW_INSECURE_HTTP=1`)
    /// says otherwise.
    pub fn new(base_url: impl Into<String>, token: impl Into<String>) -> Client {
        let mut client = Client::anonymous(base_url);
        client.token = Some(token.into());
        client.http = client.build_http();
        client
    }

    /// Allows (or, with `false`, refuses again) sending the token over
    /// plain HTTP to a host other than this machine.
    pub fn allow_insecure_http(mut self, allow: bool) -> Client {
        self.allow_insecure_http = allow;
        self.http = self.build_http();
        self
    }

    /// The HTTP client; with a token bound for plain HTTP elsewhere, one
    /// that refuses `http://` URLs outright (a backstop behind
    /// [`Client::check_transport`]).
    fn build_http(&self) -> reqwest::Client {
        let refuse_plain = self.token.is_some() && self.insecure_refusal().is_err();
        reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("relayger/", env!("CARGO_PKG_VERSION")))
            .https_only(refuse_plain)
            .build()
            // Building only fails when the TLS backend cannot start; the
            // default client hits the same wall with a clearer panic message.
            .unwrap_or_default()
    }

    /// `Err` when a token must not go to this client's server.
    fn insecure_refusal(&self) -> Result<(), ClientError> {
        if self.allow_insecure_http {
            return Ok(());
        }
        check_token_transport(&self.base_url)
            .map_err(|refused| ClientError::InvalidArgument(refused.to_string()))
    }

    /// Checked before every call that carries the token (HTTP and
    /// WebSocket).
    pub(crate) fn check_transport(&self) -> Result<(), ClientError> {
        if self.token.is_some() {
            self.insecure_refusal()
        } else {
            Ok(())
        }
    }

    /// A client without a token, for [`Client::health`] and
    /// [`Client::register`].
    pub fn anonymous(base_url: impl Into<String>) -> Client {
        let mut client = Client {
            http: reqwest::Client::new(),
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            token: None,
            keys: None,
            sender_keys: Arc::default(),
            allow_insecure_http: allowed_by_env(
                std::env::var(ALLOW_INSECURE_HTTP_ENV).ok().as_deref(),
            ),
        };
        client.http = client.build_http();
        client
    }

    /// The client for profile `name` under `$RELAYGER_HOME` (default: the
    /// user's config directory + `/relayger`): its server, token, identity
    /// and key pair.
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), relayger_worker::ClientError> {
    /// let client = relayger_worker::Client::from_profile("sender")?;
    /// let inbox = client.inbox().await?;
    /// println!("{} rooms with unread messages", inbox.rooms.len());
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_profile(name: &str) -> Result<Client, ClientError> {
        let profile = ProfileDir::from_env()?.load(name)?;
        Client::for_profile(&profile)
    }

    /// The client for an already loaded profile.
    /// A profile with an empty `secretKey` gives a client that cannot seal
    /// or open (a profile-less run without `RELAYGER_SECRET_KEY`).
    pub fn for_profile(profile: &Profile) -> Result<Client, ClientError> {
        if profile.secret_key.is_empty() {
            return Ok(Client::new(&profile.server, &profile.token));
        }
        let key_pair = profile.key_pair()?;
        Ok(Client::new(&profile.server, &profile.token)
            .with_key_pair(profile.identity_id, key_pair))
    }

    /// Uses `key_pair` as identity `identity_id`'s key for
    /// [`Client::send_sealed`] and [`Client::open_message`].
    pub fn with_key_pair(mut self, identity_id: Uuid, key_pair: KeyPair) -> Client {
        let public_key = key_pair.public_key();
        self.keys = Some(Arc::new(LocalKeys {
            identity_id,
            key_pair,
            public_key,
        }));
        self
    }

    /// The server's base URL.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `GET /healthz`: the server's version and whether its database answers.
    /// A degraded server answers 503 with the same body, returned here too.
    pub async fn health(&self) -> Result<HealthResponse, ClientError> {
        let response = self.http.get(self.url("/healthz")).send().await?;
        let status = response.status();
        let bytes = response.bytes().await?;
        match serde_json::from_slice(&bytes) {
            Ok(health) => Ok(health),
            Err(_) => Err(error_from(status.as_u16(), &bytes)),
        }
    }

    /// `POST /v1/register`: a new identity and its first token. Sent without
    /// a token.
    /// The answer carries a token, so the same transport rule applies.
    pub async fn register(&self, body: &RegisterRequest) -> Result<RegisterResponse, ClientError> {
        self.insecure_refusal()?;
        let request = self.http.post(self.url("/v1/register")).json(body);
        decode(request.send().await?).await
    }

    /// `POST /v1/agents`: the calling person creates an agent it owns.
    pub async fn create_agent(
        &self,
        body: &CreateAgentRequest,
    ) -> Result<RegisterResponse, ClientError> {
        self.post("/v1/agents", body).await
    }

    /// `GET /v1/me`: the identity the token belongs to.
    pub async fn me(&self) -> Result<Identity, ClientError> {
        self.get("/v1/me").await
    }

    /// `GET /v1/identities/{number}`: another identity's public fields,
    /// including its public key.
    pub async fn identity(&self, number: &IdentityNumber) -> Result<Identity, ClientError> {
        self.get(&format!("/v1/identities/{number}")).await
    }

    /// `POST /v1/tokens`: a new token for the same identity; its secret is
    /// returned only here.
    pub async fn create_token(
        &self,
        body: &CreateTokenRequest,
    ) -> Result<CreatedToken, ClientError> {
        self.post("/v1/tokens", body).await
    }

    /// `GET /v1/tokens`: all the identity's tokens, without secrets,
    /// newest first (every page, following `next`).
    pub async fn tokens(&self) -> Result<TokenList, ClientError> {
        all_pages(|after| self.tokens_page(after, None)).await
    }

    /// One page of `GET /v1/tokens`: tokens older than `after` (a previous
    /// page's `next`), at most `limit` (default 100, at most 500).
    pub async fn tokens_page(
        &self,
        after: Option<Uuid>,
        limit: Option<u32>,
    ) -> Result<TokenList, ClientError> {
        self.get_page("/v1/tokens", &[], after, limit).await
    }

    /// `DELETE /v1/tokens/{id}`: revokes a token from its next request on.
    pub async fn revoke_token(&self, id: Uuid) -> Result<TokenInfo, ClientError> {
        self.send_json(Method::DELETE, &format!("/v1/tokens/{id}"), None::<&()>)
            .await
    }

    /// `GET /v1/contacts`: accepted contacts and their direct rooms.
    pub async fn contacts(&self) -> Result<ContactList, ClientError> {
        self.get("/v1/contacts").await
    }

    /// `GET /v1/contacts/requests`: all pending requests both ways (every
    /// page, following `next`), for the caller or (`as_agent`) for an agent
    /// the caller owns.
    pub async fn contact_requests(
        &self,
        as_agent: Option<&IdentityNumber>,
    ) -> Result<ContactRequests, ClientError> {
        all_pages(async |after| self.contact_requests_page(as_agent, after, None).await).await
    }

    /// One page of `GET /v1/contacts/requests`: requests after `after` (a
    /// previous page's `next`), at most `limit` of both directions
    /// together (default 100, at most 500).
    pub async fn contact_requests_page(
        &self,
        as_agent: Option<&IdentityNumber>,
        after: Option<Uuid>,
        limit: Option<u32>,
    ) -> Result<ContactRequests, ClientError> {
        let params: Vec<(&str, String)> = as_agent
            .map(|agent| ("as", agent.as_str().to_owned()))
            .into_iter()
            .collect();
        self.get_page("/v1/contacts/requests", &params, after, limit)
            .await
    }

    /// `POST /v1/contacts/requests`: asks `number` to become a contact.
    pub async fn request_contact(
        &self,
        number: &IdentityNumber,
    ) -> Result<ContactRequestView, ClientError> {
        let body = ContactNumber {
            number: number.clone(),
        };
        self.post("/v1/contacts/requests", &body).await
    }

    /// `POST /v1/contacts/requests/{number}/accept`: accepts `number`'s
    /// request, for the caller or for an agent it owns; opens the direct room.
    pub async fn accept_contact(
        &self,
        number: &IdentityNumber,
        as_agent: Option<&IdentityNumber>,
    ) -> Result<Contact, ClientError> {
        let body = AnswerRequest {
            as_agent: as_agent.cloned(),
        };
        self.post(&format!("/v1/contacts/requests/{number}/accept"), &body)
            .await
    }

    /// `POST /v1/contacts/requests/{number}/decline`.
    pub async fn decline_contact(
        &self,
        number: &IdentityNumber,
        as_agent: Option<&IdentityNumber>,
    ) -> Result<ContactRequestView, ClientError> {
        let body = AnswerRequest {
            as_agent: as_agent.cloned(),
        };
        self.post(&format!("/v1/contacts/requests/{number}/decline"), &body)
            .await
    }

    /// `DELETE /v1/contacts/requests/{number}`: withdraws the caller's own
    /// pending request to `number`.
    pub async fn withdraw_contact_request(
        &self,
        number: &IdentityNumber,
    ) -> Result<ContactRequestView, ClientError> {
        self.send_json(
            Method::DELETE,
            &format!("/v1/contacts/requests/{number}"),
            None::<&()>,
        )
        .await
    }

    /// `POST /v1/contacts/{number}/block`.
    pub async fn block(&self, number: &IdentityNumber) -> Result<Done, ClientError> {
        self.send_json(
            Method::POST,
            &format!("/v1/contacts/{number}/block"),
            None::<&()>,
        )
        .await
    }

    /// `DELETE /v1/contacts/{number}/block`.
    pub async fn unblock(&self, number: &IdentityNumber) -> Result<Done, ClientError> {
        self.send_json(
            Method::DELETE,
            &format!("/v1/contacts/{number}/block"),
            None::<&()>,
        )
        .await
    }

    /// `DELETE /v1/contacts/{number}`: ends the contact and both sides'
    /// access to the direct room.
    pub async fn remove_contact(&self, number: &IdentityNumber) -> Result<Done, ClientError> {
        self.send_json(
            Method::DELETE,
            &format!("/v1/contacts/{number}"),
            None::<&()>,
        )
        .await
    }

    /// `GET /v1/rooms`: all the rooms the caller is a member of (every
    /// page, following `next`).
    pub async fn rooms(&self) -> Result<RoomList, ClientError> {
        all_pages(|after| self.rooms_page(after, None)).await
    }

    /// One page of `GET /v1/rooms`: rooms after `after` (a previous page's
    /// `next`), at most `limit` (default 50, at most 100).
    pub async fn rooms_page(
        &self,
        after: Option<Uuid>,
        limit: Option<u32>,
    ) -> Result<RoomList, ClientError> {
        self.get_page("/v1/rooms", &[], after, limit).await
    }

    /// `GET /v1/rooms/{room}`: one room with its current members and their
    /// public keys.
    pub async fn room(&self, room: Uuid) -> Result<Room, ClientError> {
        self.get(&format!("/v1/rooms/{room}")).await
    }

    /// `POST /v1/rooms`: a group room with the caller and these contacts.
    pub async fn create_room(&self, body: &CreateRoomRequest) -> Result<Room, ClientError> {
        self.post("/v1/rooms", body).await
    }

    /// `POST /v1/rooms/{room}/members`: adds one of the caller's contacts.
    pub async fn add_member(
        &self,
        room: Uuid,
        number: &IdentityNumber,
    ) -> Result<Room, ClientError> {
        let body = ContactNumber {
            number: number.clone(),
        };
        self.post(&format!("/v1/rooms/{room}/members"), &body).await
    }

    /// `POST /v1/rooms/{room}/leave`.
    pub async fn leave_room(&self, room: Uuid) -> Result<Done, ClientError> {
        self.send_json(
            Method::POST,
            &format!("/v1/rooms/{room}/leave"),
            None::<&()>,
        )
        .await
    }

    /// `POST /v1/messages`: a plain message (or an already sealed one).
    ///
    /// ```no_run
    /// # async fn example(client: relayger_worker::Client) -> Result<(), relayger_worker::ClientError> {
    /// use relayger_worker::wire::SendRequest;
    ///
    /// let sent = client
    ///     .send(&SendRequest {
    ///         to: Some("100000042".parse().expect("a number")),
    ///         text: Some("What is the status?".into()),
    ///         ask: true,
    ///         ..SendRequest::default()
    ///     })
    ///     .await?;
    /// println!("sent #{} to {}", sent.seq, sent.conversation_id);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn send(&self, body: &SendRequest) -> Result<MessageEnvelope, ClientError> {
        self.post("/v1/messages", body).await
    }

    /// `GET /v1/rooms/{room}/messages/{message}`: one message, without any
    /// byte filter.
    pub async fn message(&self, room: Uuid, message: Uuid) -> Result<MessageEnvelope, ClientError> {
        self.get(&format!("/v1/rooms/{room}/messages/{message}"))
            .await
    }

    /// `GET /v1/rooms/{room}/messages/{message}/thread`: the root and its
    /// reply chain in room-seq order, one page within the byte budget.
    pub async fn thread(
        &self,
        room: Uuid,
        message: Uuid,
        query: ThreadQuery,
    ) -> Result<ThreadResponse, ClientError> {
        let mut params: Vec<(&str, String)> = Vec::new();
        if let Some(after) = query.after {
            params.push(("after", after.to_string()));
        }
        if let Some(limit) = query.limit {
            params.push(("limit", limit.to_string()));
        }
        if let Some(max_bytes) = query.max_bytes {
            params.push(("maxBytes", max_bytes.to_string()));
        }
        self.check_transport()?;
        let request = self
            .request(
                Method::GET,
                &format!("/v1/rooms/{room}/messages/{message}/thread"),
            )
            .query(&params);
        decode(request.send().await?).await
    }

    /// `GET /v1/inbox`: per room, the messages after the caller's ACK cursor.
    /// The first page: see [`Client::inbox_page`] for the rest.
    pub async fn inbox(&self) -> Result<InboxResponse, ClientError> {
        self.inbox_page(None, None).await
    }

    /// One inbox page: rooms after `after` (a previous page's `next`), at
    /// most `limit` messages in all (default 200, at most 500).
    pub async fn inbox_page(
        &self,
        after: Option<Uuid>,
        limit: Option<u32>,
    ) -> Result<InboxResponse, ClientError> {
        self.get_page("/v1/inbox", &[], after, limit).await
    }

    /// A GET of one page of a list: `params`, then `after` and `limit`.
    async fn get_page<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        params: &[(&str, String)],
        after: Option<Uuid>,
        limit: Option<u32>,
    ) -> Result<T, ClientError> {
        self.check_transport()?;
        let mut params = params.to_vec();
        if let Some(after) = after {
            params.push(("after", after.to_string()));
        }
        if let Some(limit) = limit {
            params.push(("limit", limit.to_string()));
        }
        let request = self.request(Method::GET, path).query(&params);
        decode(request.send().await?).await
    }

    /// `POST /v1/rooms/{room}/ack`: everything up to `seq` has been seen.
    pub async fn ack(&self, room: Uuid, seq: i64) -> Result<AckResponse, ClientError> {
        self.post(&format!("/v1/rooms/{room}/ack"), &AckRequest { seq })
            .await
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    pub(crate) fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let request = self.http.request(method, self.url(path));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    pub(crate) async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.send_json(Method::GET, path, None::<&()>).await
    }

    pub(crate) async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        self.send_json(Method::POST, path, Some(body)).await
    }

    pub(crate) async fn send_json<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, ClientError> {
        self.check_transport()?;
        let mut request = self.request(method, path);
        if let Some(body) = body {
            request = request.json(body);
        }
        decode(request.send().await?).await
    }
}

/// A success body as `T`; anything else as the error it carries.
pub(crate) async fn decode<T: DeserializeOwned>(response: Response) -> Result<T, ClientError> {
    let status = response.status();
    let bytes = response.bytes().await?;
    if !status.is_success() {
        return Err(error_from(status.as_u16(), &bytes));
    }
    serde_json::from_slice(&bytes)
        .map_err(|err| unexpected(status.as_u16(), &err.to_string(), &bytes))
}

/// The error envelope of a failed response, or what the body looked like
/// when it is not one.
pub(crate) fn error_from(status: u16, bytes: &[u8]) -> ClientError {
    match serde_json::from_slice::<ErrorEnvelope>(bytes) {
        Ok(envelope) => ClientError::Api { status, envelope },
        Err(err) => unexpected(status, &err.to_string(), bytes),
    }
}

fn unexpected(status: u16, reason: &str, bytes: &[u8]) -> ClientError {
    let text = String::from_utf8_lossy(bytes);
    let mut excerpt: String = text.chars().take(BODY_EXCERPT_CHARS).collect();
    if text.chars().count() > BODY_EXCERPT_CHARS {
        excerpt.push('…');
    }
    ClientError::UnexpectedResponse {
        status,
        reason: reason.to_owned(),
        excerpt,
    }
}
