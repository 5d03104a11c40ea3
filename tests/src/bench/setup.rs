//! Identities, contacts and rooms made through the real HTTP API (never by
//! writing to the database), many at a time where the figure needs many.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Context;
use relayger_core::ids::IdentityNumber;
use relayger_core::sealed::KeyPair;
use relayger_core::wire::{CreateRoomRequest, IdentityKind, RegisterRequest};
use relayger_worker::{Client, Profile, ProfileDir};
use uuid::Uuid;

/// One registered identity with a profile file (so `relayger --profile NAME`
/// can run as it) and a client.
#[derive(Debug, Clone)]
pub(crate) struct Ident {
    pub(crate) name: String,
    pub(crate) number: IdentityNumber,
    pub(crate) client: Client,
}

/// Where the profiles live and which server they name.
#[derive(Debug, Clone)]
pub(crate) struct Identities {
    home: PathBuf,
    server: String,
}

impl Identities {
    pub(crate) fn new(home: &Path, server: &str) -> Identities {
        Identities {
            home: home.to_path_buf(),
            server: server.to_owned(),
        }
    }

    pub(crate) fn home(&self) -> &Path {
        &self.home
    }

    /// `POST /v1/register`, then the profile file `name` under the home.
    pub(crate) async fn register(&self, name: &str, agent: bool) -> anyhow::Result<Ident> {
        self.register_at(name, agent, &self.server).await
    }

    /// Like [`Identities::register`], but the profile names `server` (a
    /// proxy in front of the real server, for instance).
    pub(crate) async fn register_at(
        &self,
        name: &str,
        agent: bool,
        server: &str,
    ) -> anyhow::Result<Ident> {
        let key_pair = KeyPair::generate().map_err(|e| anyhow::anyhow!("key pair: {e}"))?;
        let response = Client::anonymous(&self.server)
            .register(&RegisterRequest {
                name: name.to_owned(),
                kind: if agent {
                    IdentityKind::Agent
                } else {
                    IdentityKind::Person
                },
                public_key: key_pair.public_base64(),
                invite: None,
            })
            .await
            .with_context(|| format!("register {name}"))?;
        let profile = Profile::from_registration(server, &response, &key_pair);
        ProfileDir::at(&self.home)
            .create(name, &profile)
            .with_context(|| format!("save profile {name}"))?;
        Ok(Ident {
            name: name.to_owned(),
            number: response.identity.number.clone(),
            client: Client::for_profile(&profile)?,
        })
    }
}

/// Makes `a` and `b` contacts; their direct room.
pub(crate) async fn befriend(a: &Ident, b: &Ident) -> anyhow::Result<Uuid> {
    a.client
        .request_contact(&b.number)
        .await
        .context("contact request")?;
    let contact = b
        .client
        .accept_contact(&a.number, None)
        .await
        .context("accept contact")?;
    Ok(contact.room_id)
}

/// `count` group rooms created by `owner` with `members`, `parallel`
/// requests at a time; their ids in creation order.
pub(crate) async fn group_rooms(
    owner: &Ident,
    members: &[IdentityNumber],
    count: usize,
    parallel: usize,
    label: &str,
) -> anyhow::Result<Vec<Uuid>> {
    let owner = owner.client.clone();
    let members = members.to_vec();
    let label = label.to_owned();
    let rooms = concurrently(count, parallel, move |i| {
        let owner = owner.clone();
        let request = CreateRoomRequest {
            name: format!("{label}-{i}"),
            members: members.clone(),
        };
        async move { Ok(owner.create_room(&request).await?.id) }
    })
    .await?;
    Ok(rooms)
}

/// Runs `job(0..count)` with at most `parallel` in flight; the results in
/// index order. The first error wins.
pub(crate) async fn concurrently<T, F, Fut>(
    count: usize,
    parallel: usize,
    job: F,
) -> anyhow::Result<Vec<T>>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<T>> + Send + 'static,
{
    let next = Arc::new(AtomicUsize::new(0));
    let job = Arc::new(job);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..parallel.max(1) {
        let next = Arc::clone(&next);
        let job = Arc::clone(&job);
        tasks.spawn(async move {
            let mut done = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return anyhow::Ok(done);
                }
                done.push((i, job(i).await?));
            }
        });
    }
    let mut all = Vec::with_capacity(count);
    while let Some(result) = tasks.join_next().await {
        all.extend(result.context("setup task panicked")??);
    }
    all.sort_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, value)| value).collect())
}
