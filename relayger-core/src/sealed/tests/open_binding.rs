//! What a sealed question is bound to: its ask, deadline and reply-to,
//! and how the versions tell apart.

use super::*;

#[test]
fn a_question_opens_only_with_the_ask_deadline_and_reply_to_it_was_sealed_with() {
    let room = Room::new(1);
    let reader = &room.others()[0];
    let deadline = crate::wire::Timestamp::parse("2030-01-01T00:00:00.123456Z").expect("time");
    let parent = Uuid::now_v7();
    let question = SealBinding {
        ask: true,
        deadline: Some(deadline),
        reply_to: Some(parent),
        ..room.binding
    };
    let payload = seal(
        &text("when?"),
        &question,
        &room.sender().keys,
        &room.recipients(),
    )
    .expect("seal");
    assert_eq!(payload.version, 2);
    let opens = |binding: &SealBinding| {
        open(
            &payload,
            binding,
            &room.sender().keys.public_key(),
            reader.id,
            &reader.keys,
        )
    };
    assert_eq!(opens(&question), Ok(text("when?")));
    let later = crate::wire::Timestamp::parse("2030-01-01T00:00:00.123457Z").expect("time");
    for (name, changed) in [
        (
            "ask cleared",
            SealBinding {
                ask: false,
                ..question
            },
        ),
        (
            "deadline dropped",
            SealBinding {
                deadline: None,
                ..question
            },
        ),
        (
            "deadline a microsecond later",
            SealBinding {
                deadline: Some(later),
                ..question
            },
        ),
        (
            "replyTo dropped",
            SealBinding {
                reply_to: None,
                ..question
            },
        ),
        (
            "replyTo another message",
            SealBinding {
                reply_to: Some(Uuid::now_v7()),
                ..question
            },
        ),
    ] {
        assert_eq!(opens(&changed), Err(OpenError::CannotOpen), "{name}");
    }
}

#[test]
fn a_deadline_finer_than_a_microsecond_is_refused() {
    let room = Room::new(1);
    let binding = SealBinding {
        ask: true,
        deadline: Some(
            crate::wire::Timestamp::parse("2030-01-01T00:00:00.0000001Z").expect("time"),
        ),
        ..room.binding
    };
    assert_eq!(
        seal(
            &text("x"),
            &binding,
            &room.sender().keys,
            &room.recipients()
        ),
        Err(SealError::DeadlineTooPrecise)
    );
}

#[test]
fn version_1_ignores_the_unbound_fields_and_no_copy_opens_as_the_other_version() {
    let room = Room::new(1);
    let reader = &room.others()[0];
    let v1 = seal_with_rng(
        SealVersion::V1,
        &text("old"),
        &room.binding,
        &room.sender().keys,
        &room.recipients(),
        &mut OsRandom::new(),
    )
    .expect("seal");
    assert_eq!(v1.version, 1);
    assert_eq!(room.open_as(&v1, reader), Ok(text("old")));
    // Version 1 never bound these, so a changed envelope still opens it.
    let flipped = SealBinding {
        ask: true,
        reply_to: Some(Uuid::now_v7()),
        ..room.binding
    };
    let sender = room.sender().keys.public_key();
    assert_eq!(
        open(&v1, &flipped, &sender, reader.id, &reader.keys),
        Ok(text("old"))
    );
    // Relabelling changes the prefix in info/aad: neither direction opens.
    let as_v2 = SealedPayload { version: 2, ..v1 };
    assert_eq!(room.open_as(&as_v2, reader), Err(OpenError::CannotOpen));
    let v2 = room.seal(&text("new"));
    let as_v1 = SealedPayload { version: 1, ..v2 };
    assert_eq!(room.open_as(&as_v1, reader), Err(OpenError::CannotOpen));
    assert_eq!(
        room.open_as(
            &SealedPayload {
                version: 3,
                ..as_v1
            },
            reader
        ),
        Err(OpenError::UnsupportedVersion)
    );
}
