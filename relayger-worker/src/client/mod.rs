//! The typed HTTP client: one method per route of the wire table in
//! `relayger_core::wire`, the bearer token on every call, and the server's
//! error envelope turned into [`ClientError::Api`].

mod a2a;
mod accounts;
mod contacts;
mod error;
pub(crate) mod pages;
mod rooms;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use relayger_core::sealed::KeyPair;
use relayger_core::transport::{ALLOW_INSECURE_HTTP_ENV, allowed_by_env, check_token_transport};
use reqwest::{Method, RequestBuilder};
use serde::Serialize;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::profile::{Profile, ProfileDir};
use crate::sealing::SenderKeys;

pub use self::error::ClientError;
pub(crate) use self::error::{decode, error_from};
pub use self::rooms::{HistoryQuery, ThreadQuery};

/// How long to wait for a TCP/TLS connection to the server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one request may take end to end; every route answers at once,
/// so a server that takes longer is stuck rather than busy.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

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

    /// A GET of one page of a list: `params`, then `after` and `limit`.
    pub(crate) async fn get_page<T: DeserializeOwned>(
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
}
