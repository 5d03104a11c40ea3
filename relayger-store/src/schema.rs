//! The diesel schema, kept by hand in step with `migrations/`.
//! A store test compares every table here with the catalog of a migrated
//! database, so the two cannot drift apart.

diesel::table! {
    identities (id) {
        id -> Uuid,
        number -> Text,
        kind -> Text,
        display_name -> Text,
        owner_id -> Nullable<Uuid>,
        public_key -> Nullable<Bytea>,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    invites (id) {
        id -> Uuid,
        code_hash -> Bytea,
        created_at -> Timestamptz,
        used_at -> Nullable<Timestamptz>,
        used_by -> Nullable<Uuid>,
    }
}

diesel::table! {
    tokens (id) {
        id -> Uuid,
        identity_id -> Uuid,
        secret_hash -> Bytea,
        scopes -> Array<Text>,
        room_ids -> Nullable<Array<Uuid>>,
        label -> Nullable<Text>,
        created_at -> Timestamptz,
        revoked_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    rooms (id) {
        id -> Uuid,
        kind -> Text,
        name -> Nullable<Text>,
        created_by -> Uuid,
        last_seq -> BigInt,
        created_at -> Timestamptz,
        members_version -> BigInt,
    }
}

diesel::table! {
    room_members (room_id, identity_id) {
        room_id -> Uuid,
        identity_id -> Uuid,
        joined_at -> Timestamptz,
        left_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    contact_requests (id) {
        id -> Uuid,
        requester_id -> Uuid,
        target_id -> Uuid,
        state -> Text,
        created_at -> Timestamptz,
        decided_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    contacts (identity_a, identity_b) {
        identity_a -> Uuid,
        identity_b -> Uuid,
        room_id -> Uuid,
        state -> Text,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    blocks (blocker_id, blocked_id) {
        blocker_id -> Uuid,
        blocked_id -> Uuid,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    messages (room_id, id) {
        id -> Uuid,
        room_id -> Uuid,
        seq -> BigInt,
        sender_id -> Uuid,
        text -> Nullable<Text>,
        sealed -> Nullable<Jsonb>,
        ask -> Bool,
        deadline -> Nullable<Timestamptz>,
        reply_to -> Nullable<Uuid>,
        by_runtime -> Bool,
        runtime_id -> Nullable<Uuid>,
        created_at -> Timestamptz,
        thread_root -> Uuid,
    }
}

diesel::table! {
    mailbox_cursors (identity_id, room_id) {
        identity_id -> Uuid,
        room_id -> Uuid,
        acked_seq -> BigInt,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    runtimes (id) {
        id -> Uuid,
        agent_id -> Uuid,
        name -> Text,
        from_mode -> Text,
        policy -> Jsonb,
        policy_fingerprint -> Text,
        config_version -> Integer,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    runtime_checkpoints (runtime_id, room_id) {
        runtime_id -> Uuid,
        room_id -> Uuid,
        seq -> BigInt,
    }
}

diesel::table! {
    runtime_dirty_rooms (runtime_id, room_id) {
        runtime_id -> Uuid,
        room_id -> Uuid,
        marked_at -> Timestamptz,
    }
}

diesel::table! {
    jobs (id) {
        id -> Uuid,
        runtime_id -> Uuid,
        room_id -> Uuid,
        message_id -> Uuid,
        state -> Text,
        attempts -> Integer,
        lease_owner -> Nullable<Text>,
        lease_version -> Nullable<BigInt>,
        lease_expires_at -> Nullable<Timestamptz>,
        not_before -> Nullable<Timestamptz>,
        reason -> Nullable<Text>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    attempts (runtime_id, lease_version) {
        job_id -> Uuid,
        runtime_id -> Uuid,
        attempt -> Integer,
        lease_owner -> Text,
        lease_version -> BigInt,
        claimed_at -> Timestamptz,
        finished_at -> Nullable<Timestamptz>,
        outcome -> Nullable<Text>,
        ended -> Nullable<Text>,
        error -> Nullable<Text>,
        model_calls -> Nullable<BigInt>,
        input_tokens -> Nullable<BigInt>,
        output_tokens -> Nullable<BigInt>,
        fingerprint -> Nullable<Bytea>,
        finish_response -> Nullable<Jsonb>,
        reply_room_id -> Nullable<Uuid>,
        reply_message_id -> Nullable<Uuid>,
        grant_seq -> BigInt,
        ended_at -> Nullable<Timestamptz>,
        end_event -> Nullable<Text>,
    }
}

diesel::table! {
    question_cancels (room_id, message_id) {
        room_id -> Uuid,
        message_id -> Uuid,
        canceled_by -> Uuid,
        canceled_at -> Timestamptz,
    }
}

diesel::table! {
    notes (id) {
        id -> Uuid,
        runtime_id -> Uuid,
        room_id -> Uuid,
        note_key -> Text,
        text -> Text,
        version -> Integer,
        source_message_ids -> Array<Uuid>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    runtime_log (id) {
        id -> BigInt,
        runtime_id -> Uuid,
        at -> Timestamptz,
        kind -> Text,
        room_id -> Nullable<Uuid>,
        message_id -> Nullable<Uuid>,
        detail -> Jsonb,
    }
}

diesel::joinable!(tokens -> identities (identity_id));
diesel::joinable!(room_members -> rooms (room_id));
diesel::joinable!(room_members -> identities (identity_id));
diesel::joinable!(messages -> rooms (room_id));
diesel::joinable!(messages -> identities (sender_id));
diesel::joinable!(runtimes -> identities (agent_id));
diesel::joinable!(runtime_checkpoints -> runtimes (runtime_id));
diesel::joinable!(jobs -> runtimes (runtime_id));
diesel::joinable!(attempts -> jobs (job_id));
diesel::joinable!(notes -> runtimes (runtime_id));
diesel::joinable!(runtime_log -> runtimes (runtime_id));

diesel::allow_tables_to_appear_in_same_query!(
    identities,
    invites,
    tokens,
    rooms,
    room_members,
    contact_requests,
    contacts,
    blocks,
    messages,
    mailbox_cursors,
    runtimes,
    runtime_checkpoints,
    runtime_dirty_rooms,
    jobs,
    attempts,
    notes,
    runtime_log,
    question_cancels,
);
