//! Notes: private to agent + runtime + room, versioned, with sources that
//! are real messages of the same room. Unreadable once membership ends.

use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use relayger_core::ErrorCode;
use relayger_core::notes::{MAX_NOTES_PER_RUNTIME, clamp_notes_page, validate_note};
use relayger_core::wire::{Note, NoteInput, Timestamp};
use time::OffsetDateTime;
use uuid::Uuid;

use super::owned_runtime;
use crate::rooms::require_member;
use crate::schema::{messages, notes};
use crate::{Caller, Store, StoreError};

/// A note as every note read and write returns it.
#[derive(Queryable, Selectable)]
#[diesel(table_name = notes)]
struct NoteRow {
    note_key: String,
    room_id: Uuid,
    text: String,
    version: i32,
    source_message_ids: Vec<Uuid>,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

fn note_view(row: NoteRow) -> Result<Note, StoreError> {
    Ok(Note {
        key: row.note_key,
        conversation_id: row.room_id,
        text: row.text,
        version: crate::error::stored("a note version", row.version)?,
        source_message_ids: row.source_message_ids,
        created_at: Timestamp(row.created_at),
        updated_at: Timestamp(row.updated_at),
    })
}

/// Serialises note creation per runtime until the transaction ends, so the
/// count below and the insert are one step: concurrent creates at 63 notes
/// leave exactly 64. A transaction-scoped advisory lock, not the runtime row:
/// a finish already holds the job and room locks here, and a claim holding
/// the runtime row may wait on that job, so the row would close a cycle.
/// Nothing waits on anything while holding this lock but the note's own
/// insert.
async fn lock_note_creation(
    conn: &mut AsyncPgConnection,
    runtime_id: Uuid,
) -> Result<(), StoreError> {
    diesel::sql_query("SELECT pg_advisory_xact_lock($1)")
        .bind::<BigInt, _>(note_lock_key(runtime_id))
        .execute(conn)
        .await?;
    Ok(())
}

/// The advisory lock key of a runtime's note creation: its id's high 64
/// bits, shifted into a namespace (a collision only serialises two
/// runtimes' note creation).
fn note_lock_key(runtime_id: Uuid) -> i64 {
    const NOTES_NAMESPACE: u64 = 0x6e6f_7465_7300_0000; // "notes"
    let (high, _) = runtime_id.as_u64_pair();
    i64::from_ne_bytes((high ^ NOTES_NAMESPACE).to_ne_bytes())
}

/// Creates (version 0) or updates (the current version) a note, in the
/// caller's transaction. Any problem is an error and writes nothing.
pub(crate) async fn write_note(
    conn: &mut AsyncPgConnection,
    caller: &Caller,
    runtime_id: Uuid,
    room_id: Uuid,
    note: &NoteInput,
) -> Result<Note, StoreError> {
    validate_note(&note.key, &note.text, &note.source_message_ids)
        .map_err(|e| StoreError::invalid(e.to_string()))?;
    require_member(conn, caller, room_id).await?;
    if !note.source_message_ids.is_empty() {
        let found: i64 = messages::table
            .filter(messages::room_id.eq(room_id))
            .filter(messages::id.eq_any(&note.source_message_ids))
            .count()
            .get_result(conn)
            .await?;
        if found != note.source_message_ids.len() as i64 {
            return Err(StoreError::invalid(
                "every source must be a message of the same room",
            ));
        }
    }
    let row: Option<NoteRow> = if note.version == 0 {
        lock_note_creation(conn, runtime_id).await?;
        let existing: i64 = notes::table
            .filter(notes::runtime_id.eq(runtime_id))
            .count()
            .get_result(conn)
            .await?;
        if existing >= MAX_NOTES_PER_RUNTIME as i64 {
            return Err(StoreError::invalid(format!(
                "a runtime keeps at most {MAX_NOTES_PER_RUNTIME} notes"
            )));
        }
        diesel::insert_into(notes::table)
            .values((
                notes::id.eq(Uuid::now_v7()),
                notes::runtime_id.eq(runtime_id),
                notes::room_id.eq(room_id),
                notes::note_key.eq(&note.key),
                notes::text.eq(&note.text),
                notes::version.eq(1),
                notes::source_message_ids.eq(&note.source_message_ids),
            ))
            .on_conflict_do_nothing()
            .returning(NoteRow::as_returning())
            .get_result(conn)
            .await
            .optional()?
    } else {
        diesel::update(
            notes::table
                .filter(notes::runtime_id.eq(runtime_id))
                .filter(notes::room_id.eq(room_id))
                .filter(notes::note_key.eq(&note.key))
                .filter(notes::version.eq(i32::try_from(note.version).unwrap_or(-1))),
        )
        .set((
            notes::text.eq(&note.text),
            notes::version.eq(notes::version + 1),
            notes::source_message_ids.eq(&note.source_message_ids),
            notes::updated_at.eq(diesel::dsl::now),
        ))
        .returning(NoteRow::as_returning())
        .get_result(conn)
        .await
        .optional()?
    };
    row.map(note_view).transpose()?.ok_or_else(|| {
        StoreError::rejected(
            ErrorCode::VersionConflict,
            format!(
                "note `{}` is not at version {} (version 0 creates a note that does not exist yet); read it and retry",
                note.key, note.version
            ),
        )
    })
}

impl Store {
    /// Writes a note (the CLI's `runtimes note`): an operator action of its own.
    pub async fn put_note(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
        room_id: Uuid,
        note: NoteInput,
    ) -> Result<Note, StoreError> {
        let mut conn = self.conn().await?;
        let caller = caller.clone();
        conn.transaction(async |conn| -> Result<_, StoreError> {
            owned_runtime(conn, caller.identity_id, runtime_id, false).await?;
            write_note(conn, &caller, runtime_id, room_id, &note).await
        })
        .await
    }

    /// The newest notes of a runtime in a room (at most 20).
    pub async fn notes(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
        room_id: Uuid,
        limit: Option<u32>,
        after: Option<&str>,
    ) -> Result<(Vec<Note>, Option<String>), StoreError> {
        let mut conn = self.conn().await?;
        owned_runtime(&mut conn, caller.identity_id, runtime_id, false).await?;
        require_member(&mut conn, caller, room_id).await?;
        let page_size = clamp_notes_page(limit);
        // Newest first; a page continues after the note whose key is
        // `after` (by its time and id).
        let mut query = notes::table
            .filter(notes::runtime_id.eq(runtime_id))
            .filter(notes::room_id.eq(room_id))
            .order((notes::updated_at.desc(), notes::id.desc()))
            .limit(i64::from(page_size) + 1)
            .select(NoteRow::as_select())
            .into_boxed();
        if let Some(after) = after {
            query = query.filter(
                diesel::dsl::sql::<diesel::sql_types::Bool>(
                    "(notes.updated_at, notes.id) < (SELECT a.updated_at, a.id FROM notes a \
                     WHERE a.runtime_id = ",
                )
                .bind::<diesel::sql_types::Uuid, _>(runtime_id)
                .sql(" AND a.room_id = ")
                .bind::<diesel::sql_types::Uuid, _>(room_id)
                .sql(" AND a.note_key = ")
                .bind::<diesel::sql_types::Text, _>(after.to_owned())
                .sql(")"),
            );
        }
        let rows: Vec<NoteRow> = query.load(&mut conn).await?;
        let (rows, next) =
            relayger_core::paging::cut_page(rows, page_size, |row| row.note_key.clone());
        let notes = rows.into_iter().map(note_view).collect::<Result<_, _>>()?;
        Ok((notes, next))
    }
}
