//! What every command runs with: the profile directory, the profile (or the
//! environment's credentials) and the client built from them.

use relayger_core::sealed::KeyPair;
use relayger_worker::{Client, Profile, ProfileDir};
use uuid::Uuid;

use crate::error::CliError;
use crate::output::Mode;

/// Where profiles live, which one this run uses, and how to print.
#[derive(Debug)]
pub(crate) struct Context {
    pub(crate) dir: ProfileDir,
    pub(crate) profile: String,
    /// `RELAYGER_SERVER` + `RELAYGER_TOKEN`: act without a profile file.
    pub(crate) env: Option<EnvCredentials>,
    /// For commands that print as they go (`worker run`).
    pub(crate) mode: Mode,
    /// `--allow-insecure-http`: tokens may go over plain HTTP elsewhere.
    pub(crate) allow_insecure_http: bool,
}

/// A profile-less run's credentials (containers, CI): used when both
/// `RELAYGER_SERVER` and `RELAYGER_TOKEN` are set and no profile is named.
#[derive(Clone)]
pub(crate) struct EnvCredentials {
    server: String,
    token: String,
    /// `RELAYGER_SECRET_KEY`: base64 of the identity's X25519 secret key,
    /// for sealing and opening; without it sealed messages stay sealed.
    secret_key: Option<String>,
}

impl std::fmt::Debug for EnvCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvCredentials")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

pub(crate) const SERVER_ENV: &str = "RELAYGER_SERVER";
pub(crate) const TOKEN_ENV: &str = "RELAYGER_TOKEN";
pub(crate) const SECRET_KEY_ENV: &str = "RELAYGER_SECRET_KEY";

impl EnvCredentials {
    /// The credentials in the environment, when a run should use them: a
    /// named profile (`--profile`, `$RELAYGER_PROFILE`) wins.
    pub(crate) fn from_env(profile_named: bool) -> Result<Option<EnvCredentials>, CliError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let (server, token) = (var(SERVER_ENV), var(TOKEN_ENV));
        if profile_named || (server.is_none() && token.is_none()) {
            return Ok(None);
        }
        let (Some(server), Some(token)) = (server, token) else {
            return Err(CliError::invalid(format!(
                "set both {SERVER_ENV} and {TOKEN_ENV} to run without a profile (or neither)"
            )));
        };
        if !(server.starts_with("http://") || server.starts_with("https://")) {
            return Err(CliError::invalid(format!(
                "{SERVER_ENV} `{server}` is not an http:// or https:// URL"
            )));
        }
        Ok(Some(EnvCredentials {
            server,
            token,
            secret_key: var(SECRET_KEY_ENV),
        }))
    }

    /// A profile for these credentials, completed from `GET /v1/me`; its
    /// secret key is empty without `RELAYGER_SECRET_KEY`.
    async fn profile(&self) -> Result<Profile, CliError> {
        let me = Client::new(&self.server, &self.token).me().await?;
        let public_key = me.public_key.clone().unwrap_or_default();
        let secret_key = match &self.secret_key {
            Some(secret) => {
                let pair = KeyPair::from_secret_base64(secret)
                    .map_err(|err| CliError::invalid(format!("{SECRET_KEY_ENV}: {err}")))?;
                if pair.public_base64() != public_key {
                    return Err(CliError::invalid(format!(
                        "{SECRET_KEY_ENV} is not the key of identity {} (its public half differs from the registered key)",
                        me.number
                    )));
                }
                secret.clone()
            }
            None => String::new(),
        };
        Ok(Profile {
            version: 1,
            server: self.server.clone(),
            // Not known from the token alone.
            token_id: Uuid::nil(),
            token: self.token.clone(),
            identity_id: me.id,
            number: me.number,
            kind: me.kind,
            display_name: me.display_name,
            owner_number: me.owner_number,
            public_key,
            secret_key,
        })
    }
}

impl Context {
    pub(crate) async fn load(&self) -> Result<Profile, CliError> {
        match &self.env {
            Some(env) => env.profile().await,
            None => Ok(self.dir.load(&self.profile)?),
        }
    }

    pub(crate) async fn client(&self) -> Result<Client, CliError> {
        match &self.env {
            // Without a secret key there is nothing to ask `/v1/me` for.
            Some(env) if env.secret_key.is_none() => {
                Ok(self.allowing(Client::new(&env.server, &env.token)))
            }
            _ => self.client_for(&self.load().await?),
        }
    }

    /// The client of `profile`, with this run's transport allowance.
    pub(crate) fn client_for(&self, profile: &Profile) -> Result<Client, CliError> {
        Ok(self.allowing(Client::for_profile(profile)?))
    }

    /// `client` with `--allow-insecure-http` applied when given (the
    /// environment variable is read by the client itself).
    pub(crate) fn allowing(&self, client: Client) -> Client {
        if self.allow_insecure_http {
            client.allow_insecure_http(true)
        } else {
            client
        }
    }
}
