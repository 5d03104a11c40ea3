//! Recently authenticated tokens, keyed by the hash of the secret, so a
//! request usually skips the token lookup.
//!
//! Safe only while revocations are heard: an entry lives at most [`TTL`];
//! a revocation (this instance's, or another's through NOTIFY) removes the
//! token's entries; the LISTEN connection's (re)subscription flushes
//! everything (revocations may have been missed meanwhile); and while LISTEN
//! is down the cache is neither read nor filled. Unknown and revoked tokens
//! are never cached, so a guessed secret always costs a lookup.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use relayger_store::AuthenticatedToken;
use uuid::Uuid;

/// How long an entry is trusted without a fresh lookup.
pub(crate) const TTL: Duration = Duration::from_secs(30);
/// Entries kept at most; a full cache drops its expired entries, then all.
const MAX_ENTRIES: usize = 10_000;

#[derive(Debug)]
struct Entry {
    stored_hash: Vec<u8>,
    token: AuthenticatedToken,
    at: Instant,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<Vec<u8>, Entry>,
    /// Bumped by every revocation and flush: a lookup that began before
    /// one must not store what it read.
    generation: u64,
    /// Whether revocations are being heard (LISTEN subscribed).
    listening: bool,
}

#[derive(Debug, Default)]
pub(crate) struct TokenCache {
    inner: Mutex<Inner>,
}

/// Taken before a lookup; hands the result back to [`TokenCache::store`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket {
    generation: u64,
    listening: bool,
}

impl TokenCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cached token for this secret hash, or a ticket for the lookup.
    pub(crate) fn get(
        &self,
        hash: &[u8],
        now: Instant,
    ) -> Result<(Vec<u8>, AuthenticatedToken), Ticket> {
        let inner = self.lock();
        let ticket = Ticket {
            generation: inner.generation,
            listening: inner.listening,
        };
        if !inner.listening {
            return Err(ticket);
        }
        match inner.entries.get(hash) {
            Some(entry) if now.duration_since(entry.at) < TTL => {
                Ok((entry.stored_hash.clone(), entry.token.clone()))
            }
            _ => Err(ticket),
        }
    }

    /// Remembers a token the database just authenticated, unless a
    /// revocation or flush happened since the ticket was taken.
    pub(crate) fn store(
        &self,
        ticket: Ticket,
        hash: &[u8],
        stored_hash: &[u8],
        token: &AuthenticatedToken,
        now: Instant,
    ) {
        let mut inner = self.lock();
        if !ticket.listening || !inner.listening || ticket.generation != inner.generation {
            return;
        }
        if inner.entries.len() >= MAX_ENTRIES {
            inner.entries.retain(|_, e| now.duration_since(e.at) < TTL);
            if inner.entries.len() >= MAX_ENTRIES {
                inner.entries.clear();
            }
        }
        inner.entries.insert(
            hash.to_vec(),
            Entry {
                stored_hash: stored_hash.to_vec(),
                token: token.clone(),
                at: now,
            },
        );
    }

    /// A token was revoked: forget it (and any lookup in flight).
    pub(crate) fn revoked(&self, token_id: Uuid) {
        let mut inner = self.lock();
        inner.generation += 1;
        inner.entries.retain(|_, e| e.token.token_id != token_id);
    }

    /// LISTEN (re)subscribed (`true`) or was lost (`false`): revocations
    /// may have been missed, so everything is forgotten.
    pub(crate) fn set_listening(&self, listening: bool) {
        let mut inner = self.lock();
        inner.generation += 1;
        inner.entries.clear();
        inner.listening = listening;
    }
}

#[cfg(test)]
mod tests {
    use relayger_store::IdentityRow;

    use super::*;

    fn token() -> AuthenticatedToken {
        AuthenticatedToken {
            token_id: Uuid::new_v4(),
            scopes: Vec::new(),
            rooms: None,
            identity: IdentityRow {
                id: Uuid::new_v4(),
                number: "ag_test".to_owned(),
                kind: "agent".to_owned(),
                display_name: "test".to_owned(),
                owner_id: None,
                public_key: None,
                created_at: time::OffsetDateTime::UNIX_EPOCH,
            },
        }
    }

    /// A cache that hears revocations and holds `token` under `hash`.
    fn filled(hash: &[u8], token: &AuthenticatedToken, at: Instant) -> TokenCache {
        let cache = TokenCache::default();
        cache.set_listening(true);
        let ticket = cache.get(hash, at).expect_err("empty");
        cache.store(ticket, hash, hash, token, at);
        cache
    }

    #[test]
    fn a_stored_token_is_served_until_its_ttl_ends() {
        let now = Instant::now();
        let token = token();
        let cache = filled(b"h", &token, now);
        let (stored, hit) = cache.get(b"h", now + TTL / 2).expect("hit");
        assert_eq!(
            (stored.as_slice(), hit.token_id),
            (&b"h"[..], token.token_id)
        );
        assert!(cache.get(b"h", now + TTL).is_err(), "expired");
        assert!(cache.get(b"other", now).is_err(), "another secret");
    }

    /// Something that happens to a cache holding one token.
    type Event = fn(&TokenCache, Uuid);

    #[test]
    fn what_forgets_an_entry() {
        let cases: [(&str, Event); 4] = [
            ("its revocation", |c, id| c.revoked(id)),
            ("a resubscription", |c, _| c.set_listening(true)),
            ("losing LISTEN", |c, _| c.set_listening(false)),
            ("losing LISTEN, then resubscribing", |c, _| {
                c.set_listening(false);
                c.set_listening(true);
            }),
        ];
        for (what, event) in cases {
            let now = Instant::now();
            let token = token();
            let cache = filled(b"h", &token, now);
            event(&cache, token.token_id);
            assert!(cache.get(b"h", now).is_err(), "{what}");
        }
        // Another token's revocation keeps it.
        let now = Instant::now();
        let token = token();
        let cache = filled(b"h", &token, now);
        cache.revoked(Uuid::new_v4());
        assert!(cache.get(b"h", now).is_ok());
    }

    #[test]
    fn a_lookup_that_raced_a_revocation_or_ran_while_not_listening_is_not_stored() {
        let now = Instant::now();
        let token = token();
        let cache = TokenCache::default();
        let ticket = cache.get(b"h", now).expect_err("not listening");
        cache.store(ticket, b"h", b"h", &token, now);
        cache.set_listening(true);
        assert!(cache.get(b"h", now).is_err(), "filled while deaf");

        let ticket = cache.get(b"h", now).expect_err("empty");
        cache.revoked(token.token_id);
        cache.store(ticket, b"h", b"h", &token, now);
        assert!(cache.get(b"h", now).is_err(), "read before the revocation");

        let ticket = cache.get(b"h", now).expect_err("empty");
        cache.store(ticket, b"h", b"h", &token, now);
        assert!(cache.get(b"h", now).is_ok(), "an undisturbed lookup");
    }
}
