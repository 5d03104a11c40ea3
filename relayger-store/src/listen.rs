//! LISTEN on a dedicated connection (not from the pool), reconnecting with
//! backoff. NOTIFY is only a hint: whoever waits on it also has a fallback.

use std::time::Duration;

use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use futures_util::StreamExt;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::outbox::{INBOX_CHANNEL, REVOKED_CHANNEL};

/// What another (or this) server instance announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Announcement {
    /// These identities have something new to look at.
    InboxChanged(Vec<Uuid>),
    /// This token was revoked.
    TokenRevoked(Uuid),
    /// The listener is subscribed (first connection or a reconnection):
    /// anything may have been missed meanwhile, so every waiter should look
    /// again.
    Listening,
}

/// Listens until `out` is closed; reconnects with exponential backoff.
pub async fn listen(database_url: String, out: mpsc::Sender<Announcement>) {
    let mut backoff = Duration::from_millis(100);
    while !out.is_closed() {
        match AsyncPgConnection::establish(&database_url).await {
            Ok(mut conn) => {
                let subscribed = async {
                    diesel::sql_query(format!("LISTEN {INBOX_CHANNEL}"))
                        .execute(&mut conn)
                        .await?;
                    diesel::sql_query(format!("LISTEN {REVOKED_CHANNEL}"))
                        .execute(&mut conn)
                        .await
                }
                .await;
                if let Err(err) = subscribed {
                    tracing::warn!(%err, "LISTEN failed");
                } else {
                    backoff = Duration::from_millis(100);
                    if out.send(Announcement::Listening).await.is_err() {
                        return;
                    }
                    let mut stream = std::pin::pin!(conn.notifications_stream());
                    while let Some(item) = stream.next().await {
                        let notification = match item {
                            Ok(notification) => notification,
                            Err(err) => {
                                tracing::warn!(%err, "notification stream failed");
                                break;
                            }
                        };
                        let Some(announcement) =
                            parse(&notification.channel, &notification.payload)
                        else {
                            continue;
                        };
                        if out.send(announcement).await.is_err() {
                            return;
                        }
                    }
                    tracing::warn!("the LISTEN connection closed; reconnecting");
                }
            }
            Err(err) => tracing::warn!(%err, "cannot open the LISTEN connection"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(10));
    }
}

fn parse(channel: &str, payload: &str) -> Option<Announcement> {
    match channel {
        INBOX_CHANNEL => Some(Announcement::InboxChanged(
            payload
                .split(',')
                .filter_map(|id| id.parse().ok())
                .collect(),
        )),
        REVOKED_CHANNEL => payload.parse().ok().map(Announcement::TokenRevoked),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_parse() {
        let a = Uuid::now_v7();
        let b = Uuid::now_v7();
        assert_eq!(
            parse(INBOX_CHANNEL, &format!("{a},{b}")),
            Some(Announcement::InboxChanged(vec![a, b]))
        );
        assert_eq!(
            parse(REVOKED_CHANNEL, &a.to_string()),
            Some(Announcement::TokenRevoked(a))
        );
        assert_eq!(parse(REVOKED_CHANNEL, "junk"), None);
        assert_eq!(parse("other", "x"), None);
    }
}
