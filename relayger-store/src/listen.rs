//! LISTEN on a dedicated connection (not from the pool), reconnecting with
//! backoff. NOTIFY is only a hint: whoever waits on it also has a fallback.

use std::time::{Duration, SystemTime};

use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use futures_util::StreamExt;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::wake::{
    DELIVERY_CHANNEL, INBOX_CHANNEL, PRESENCE_CHANNEL, REVOKED_CHANNEL, RUNTIME_CHANNEL,
    payload_published_at,
};

/// What another (or this) server instance announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Announcement {
    /// These identities have something new to look at. `published_at`:
    /// when the sending instance published the earliest of them (by its
    /// clock), if the payload says.
    InboxChanged {
        identity_ids: Vec<Uuid>,
        published_at: Option<SystemTime>,
    },
    /// A runtime of each of these agents changed (a claim, finish,
    /// heartbeat, release, retry or configuration on another instance).
    RuntimesChanged {
        identity_ids: Vec<Uuid>,
        published_at: Option<SystemTime>,
    },
    /// One of each of these identities' questions changed its delivery.
    DeliveriesChanged { identity_ids: Vec<Uuid> },
    /// This token was revoked.
    TokenRevoked(Uuid),
    /// The listener is subscribed (first connection or a reconnection):
    /// anything may have been missed meanwhile, so every waiter should look
    /// again.
    Listening,
    /// The LISTEN connection failed (it reconnects): nothing is heard until
    /// the next `Listening`.
    Lost,
    /// Another server instance announced itself (its listener's ping).
    PeerHeard,
}

/// How the LISTEN connection proves it is alive: when it subscribes and
/// every `ping_every` after that it NOTIFYs its instance's origin on the
/// shared presence channel and must hear that NOTIFY back within
/// `ping_timeout`, or it reconnects (and announces `Listening`, so every
/// waiter looks again). A half-open or hung connection would otherwise
/// deliver nothing, silently, forever. The same pings tell every other
/// instance that this one listens ([`Announcement::PeerHeard`]); the first
/// after subscribing is a hello, which every other listening instance
/// answers at once with a ping, so within `answer_within` an instance
/// knows whether it has company
/// ([`relayger_core::peers::PeerPresence`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenOptions {
    pub ping_every: Duration,
    pub ping_timeout: Duration,
    /// How long after subscribing the answers to the hello may take; a
    /// healthy listener answers within milliseconds.
    pub answer_within: Duration,
}

impl Default for ListenOptions {
    fn default() -> Self {
        ListenOptions {
            ping_every: Duration::from_secs(10),
            ping_timeout: Duration::from_secs(5),
            answer_within: Duration::from_secs(1),
        }
    }
}

/// Listens until `out` is closed; reconnects with exponential backoff.
/// Inbox changes this instance sent itself (`origin`, see
/// [`crate::wake::Notifier`]) are not announced: it woke its own sockets
/// when it committed.
pub async fn listen(
    database_url: String,
    options: ListenOptions,
    origin: Uuid,
    out: mpsc::Sender<Announcement>,
) {
    let mut backoff = Duration::from_millis(100);
    while !out.is_closed() {
        match AsyncPgConnection::establish(&database_url).await {
            Ok(mut conn) => {
                let subscribed = async {
                    for channel in [
                        INBOX_CHANNEL,
                        RUNTIME_CHANNEL,
                        DELIVERY_CHANNEL,
                        REVOKED_CHANNEL,
                        PRESENCE_CHANNEL,
                    ] {
                        diesel::sql_query(format!("LISTEN {channel}"))
                            .execute(&mut conn)
                            .await?;
                    }
                    diesel::QueryResult::Ok(())
                };
                match tokio::time::timeout(options.ping_timeout, subscribed).await {
                    Ok(Ok(())) => {
                        backoff = Duration::from_millis(100);
                        if out.send(Announcement::Listening).await.is_err() {
                            return;
                        }
                        match relay(&mut conn, options, origin, &out).await {
                            Ended::OutClosed => return,
                            Ended::Failed(why) => {
                                tracing::warn!(%why, "the LISTEN connection failed; reconnecting");
                                if out.send(Announcement::Lost).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                    Ok(Err(err)) => tracing::warn!(%err, "LISTEN failed"),
                    Err(_) => tracing::warn!("LISTEN timed out"),
                }
            }
            Err(err) => tracing::warn!(%err, "cannot open the LISTEN connection"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(10));
    }
}

enum Ended {
    OutClosed,
    Failed(String),
}

/// Forwards notifications and pings the connection (at once with a hello,
/// so other instances hear of this one and answer, then every
/// `ping_every`, and at once again whenever another instance says hello),
/// until it fails.
async fn relay(
    conn: &mut AsyncPgConnection,
    options: ListenOptions,
    origin: Uuid,
    out: &mpsc::Sender<Announcement>,
) -> Ended {
    let mut next_ping = tokio::time::Instant::now();
    let mut hello = true;
    loop {
        let heard = {
            let mut stream = std::pin::pin!(conn.notifications_stream());
            tokio::select! {
                item = stream.next() => Some(item),
                () = tokio::time::sleep_until(next_ping) => None,
            }
        };
        match heard {
            Some(Some(Ok(notification))) => match forward(&notification, origin, out).await {
                Forwarded::OutClosed => return Ended::OutClosed,
                Forwarded::Hello => next_ping = tokio::time::Instant::now(),
                Forwarded::Other => {}
            },
            Some(Some(Err(err))) => return Ended::Failed(err.to_string()),
            Some(None) => return Ended::Failed("the connection closed".to_owned()),
            None => {
                let pinged = ping(conn, origin, hello, out);
                match tokio::time::timeout(options.ping_timeout, pinged).await {
                    Ok(Ok(Pinged::Echoed { hello_heard })) => {
                        next_ping = match hello_heard {
                            // Another instance said hello meanwhile: it may
                            // have subscribed after this ping went out.
                            true => tokio::time::Instant::now(),
                            false => tokio::time::Instant::now() + options.ping_every,
                        };
                    }
                    Ok(Ok(Pinged::OutClosed)) => return Ended::OutClosed,
                    Ok(Err(err)) => return Ended::Failed(err),
                    Err(_) => {
                        return Ended::Failed(format!(
                            "no answer to its own NOTIFY within {:?}",
                            options.ping_timeout
                        ));
                    }
                }
                hello = false;
            }
        }
    }
}

/// What [`forward`] did with a notification.
enum Forwarded {
    OutClosed,
    /// Another instance said hello (and was announced as heard): answer it.
    Hello,
    Other,
}

/// Announces what a notification says, if anything.
async fn forward(
    notification: &diesel::pg::PgNotification,
    origin: Uuid,
    out: &mpsc::Sender<Announcement>,
) -> Forwarded {
    let announcement = parse(&notification.channel, &notification.payload, origin);
    let hello = announcement == Some(Announcement::PeerHeard)
        && notification.payload.starts_with(HELLO_PREFIX);
    if let Some(announcement) = announcement
        && out.send(announcement).await.is_err()
    {
        return Forwarded::OutClosed;
    }
    match hello {
        true => Forwarded::Hello,
        false => Forwarded::Other,
    }
}

/// How a ping ended.
enum Pinged {
    /// Its own NOTIFY came back; `hello_heard` when another instance said
    /// hello meanwhile.
    Echoed {
        hello_heard: bool,
    },
    OutClosed,
}

/// A hello on the presence channel: `hello:` and the origin. An older
/// instance, which knows no hellos, takes it for a ping.
const HELLO_PREFIX: &str = "hello:";

/// NOTIFYs this instance's origin on the presence channel (as a hello when
/// `hello`) and waits to hear it, forwarding whatever else arrives
/// meanwhile.
async fn ping(
    conn: &mut AsyncPgConnection,
    origin: Uuid,
    hello: bool,
    out: &mpsc::Sender<Announcement>,
) -> Result<Pinged, String> {
    let own = match hello {
        true => format!("{HELLO_PREFIX}{}", origin.simple()),
        false => origin.simple().to_string(),
    };
    diesel::sql_query("SELECT pg_notify($1, $2) AS ping")
        .bind::<diesel::sql_types::Text, _>(PRESENCE_CHANNEL)
        .bind::<diesel::sql_types::Text, _>(&own)
        .execute(conn)
        .await
        .map_err(|e| e.to_string())?;
    let mut hello_heard = false;
    let mut stream = std::pin::pin!(conn.notifications_stream());
    while let Some(item) = stream.next().await {
        let notification = item.map_err(|e| e.to_string())?;
        if notification.channel == PRESENCE_CHANNEL && notification.payload == own {
            return Ok(Pinged::Echoed { hello_heard });
        }
        match forward(&notification, origin, out).await {
            Forwarded::OutClosed => return Ok(Pinged::OutClosed),
            Forwarded::Hello => hello_heard = true,
            Forwarded::Other => {}
        }
    }
    Err("the connection closed".to_owned())
}

/// `origin@micros:id,id,…` (see [`crate::wake::Notifier`]); an older
/// instance sends `origin:id,…`, and one that names no origin only ids.
fn parse(channel: &str, payload: &str, origin: Uuid) -> Option<Announcement> {
    match channel {
        INBOX_CHANNEL | RUNTIME_CHANNEL | DELIVERY_CHANNEL => {
            let (ids, published_at) = match payload.split_once(':') {
                Some((sender, ids)) => {
                    let (sender, micros) = sender.split_once('@').unwrap_or((sender, ""));
                    if sender.parse::<Uuid>().ok() == Some(origin) {
                        return None;
                    }
                    (ids, payload_published_at(micros))
                }
                None => (payload, None),
            };
            let ids = ids.split(',').filter_map(|id| id.parse().ok()).collect();
            Some(match channel {
                INBOX_CHANNEL => Announcement::InboxChanged {
                    identity_ids: ids,
                    published_at,
                },
                RUNTIME_CHANNEL => Announcement::RuntimesChanged {
                    identity_ids: ids,
                    published_at,
                },
                _ => Announcement::DeliveriesChanged { identity_ids: ids },
            })
        }
        REVOKED_CHANNEL => payload.parse().ok().map(Announcement::TokenRevoked),
        // Its own pings are answered in `ping`; a late one says nothing.
        PRESENCE_CHANNEL => {
            let sender = payload.strip_prefix(HELLO_PREFIX).unwrap_or(payload);
            (sender.parse::<Uuid>().ok() != Some(origin)).then_some(Announcement::PeerHeard)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inbox(identity_ids: Vec<Uuid>, published_at: Option<SystemTime>) -> Option<Announcement> {
        Some(Announcement::InboxChanged {
            identity_ids,
            published_at,
        })
    }

    #[test]
    fn payloads_parse() {
        let a = Uuid::now_v7();
        let b = Uuid::now_v7();
        let me = Uuid::new_v4();
        let other = Uuid::new_v4();
        let at = SystemTime::UNIX_EPOCH + Duration::from_micros(1_796_000_000_123_456);
        let cases = [
            // No origin at all, and an older instance's origin without a time.
            (INBOX_CHANNEL, format!("{a},{b}"), inbox(vec![a, b], None)),
            (
                INBOX_CHANNEL,
                format!("{}:{a},{b}", other.simple()),
                inbox(vec![a, b], None),
            ),
            (
                INBOX_CHANNEL,
                format!("{}@1796000000123456:{a}", other.simple()),
                inbox(vec![a], Some(at)),
            ),
            // An unreadable time is no time; the ids still count.
            (
                INBOX_CHANNEL,
                format!("{}@soon:{a}", other.simple()),
                inbox(vec![a], None),
            ),
            (
                RUNTIME_CHANNEL,
                format!("{}@1796000000123456:{b}", other.simple()),
                Some(Announcement::RuntimesChanged {
                    identity_ids: vec![b],
                    published_at: Some(at),
                }),
            ),
            (
                DELIVERY_CHANNEL,
                format!("{}@1796000000123456:{a},{b}", other.simple()),
                Some(Announcement::DeliveriesChanged {
                    identity_ids: vec![a, b],
                }),
            ),
            (
                DELIVERY_CHANNEL,
                format!("{}@1796000000123456:{a}", me.simple()),
                None,
            ),
            (
                REVOKED_CHANNEL,
                a.to_string(),
                Some(Announcement::TokenRevoked(a)),
            ),
            (REVOKED_CHANNEL, "junk".to_owned(), None),
            // Another instance's ping, and this one's own (late) ping.
            (
                PRESENCE_CHANNEL,
                other.simple().to_string(),
                Some(Announcement::PeerHeard),
            ),
            (PRESENCE_CHANNEL, me.simple().to_string(), None),
            // Another instance's hello, and this one's own (late) hello.
            (
                PRESENCE_CHANNEL,
                format!("hello:{}", other.simple()),
                Some(Announcement::PeerHeard),
            ),
            (PRESENCE_CHANNEL, format!("hello:{}", me.simple()), None),
            ("other", "x".to_owned(), None),
        ];
        for (channel, payload, expected) in cases {
            assert_eq!(
                parse(channel, &payload, me),
                expected,
                "{channel} {payload}"
            );
        }
    }

    #[test]
    fn changes_from_another_instance_are_announced_with_their_time_and_our_own_are_not() {
        let a = Uuid::now_v7();
        let b = Uuid::now_v7();
        let me = Uuid::new_v4();
        let other = Uuid::new_v4();
        // Microseconds survive the trip; anything finer is cut off.
        let at = SystemTime::UNIX_EPOCH + Duration::from_micros(1_796_000_000_654_321);
        let theirs = crate::wake::change_payload(other, at, &[a, b]);
        assert_eq!(
            parse(INBOX_CHANNEL, &theirs, me),
            inbox(vec![a, b], Some(at))
        );
        assert_eq!(
            parse(RUNTIME_CHANNEL, &theirs, me),
            Some(Announcement::RuntimesChanged {
                identity_ids: vec![a, b],
                published_at: Some(at),
            })
        );
        let ours = crate::wake::change_payload(me, at, &[a, b]);
        assert_eq!(parse(INBOX_CHANNEL, &ours, me), None);
        assert_eq!(parse(RUNTIME_CHANNEL, &ours, me), None);
    }
}
