//! What a room-restricted token sees of a runtime that serves more rooms
//! than the token: only its own rooms' facts. The store counts jobs,
//! attempts and log records of those rooms only; these are the rules for
//! the rest, the policy's room list and the log's lease versions.

use serde_json::Value;
use uuid::Uuid;

/// The policy's `allowedRooms` as a token restricted to `token_rooms` (none:
/// unrestricted) may see them: the rooms it can see, and whether any were
/// left out. An unrestricted token sees them all; a restricted one never
/// learns the ids of rooms beyond its own, only that the runtime names
/// some (so a cut list is not read as "every room", which an empty one
/// means).
pub fn visible_allowed_rooms(allowed: &[Uuid], token_rooms: Option<&[Uuid]>) -> (Vec<Uuid>, bool) {
    match token_rooms {
        None => (allowed.to_vec(), false),
        Some(rooms) => {
            let visible: Vec<Uuid> = allowed
                .iter()
                .copied()
                .filter(|room| rooms.contains(room))
                .collect();
            let hidden = visible.len() < allowed.len();
            (visible, hidden)
        }
    }
}

/// A log record's detail as a restricted token may see it: a `claimed`
/// record without its lease version (part of what fences a finish, and a
/// count of the runtime's claims in every room). A `configured` record's
/// version is the configuration's, which inspect shows anyway. Unrestricted
/// tokens see every detail whole.
pub fn visible_log_detail(kind: &str, mut detail: Value, restricted: bool) -> Value {
    if restricted
        && kind == "claimed"
        && let Some(fields) = detail.as_object_mut()
    {
        fields.remove("version");
    }
    detail
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn room(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    #[test]
    fn allowed_rooms_are_cut_to_the_tokens_rooms() {
        type Case<'a> = (&'a [Uuid], Option<&'a [Uuid]>, (Vec<Uuid>, bool));
        let (a, b, c) = (room(1), room(2), room(3));
        let table: [Case; 6] = [
            (&[a, b], None, (vec![a, b], false)),
            (&[], None, (vec![], false)),
            (&[], Some(&[a]), (vec![], false)),
            (&[a, b], Some(&[a, b, c]), (vec![a, b], false)),
            (&[a, b], Some(&[b]), (vec![b], true)),
            (&[a, b], Some(&[c]), (vec![], true)),
        ];
        for (allowed, token, expected) in table {
            assert_eq!(
                visible_allowed_rooms(allowed, token),
                expected,
                "{allowed:?} seen by {token:?}"
            );
        }
    }

    #[test]
    fn a_restricted_token_sees_no_lease_version() {
        let claimed = json!({"attempt": 1, "version": "00000000000000000001"});
        let table = [
            ("claimed", claimed.clone(), false, claimed.clone()),
            ("claimed", claimed.clone(), true, json!({"attempt": 1})),
            ("claimed", json!({"version": 3}), true, json!({})),
            ("claimed", json!(null), true, json!(null)),
            (
                "configured",
                json!({"version": 2}),
                true,
                json!({"version": 2}),
            ),
            (
                "replied",
                json!({"attempt": 2}),
                true,
                json!({"attempt": 2}),
            ),
        ];
        for (kind, detail, restricted, expected) in table {
            assert_eq!(
                visible_log_detail(kind, detail.clone(), restricted),
                expected,
                "{kind} {detail} restricted: {restricted}"
            );
        }
    }
}
