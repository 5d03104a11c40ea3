-- Relayger's initial schema: identities, tokens, contacts, rooms, messages,
-- mailbox cursors, and the persistent-listener runtime (checkpoints, jobs,
-- attempts, completions, budget, notes, log) plus the outbox that turns
-- commits into wake signals. Constraints make bad states unrepresentable;
-- the rules themselves live in relayger-core.

CREATE SEQUENCE identity_number_seq START 1;

CREATE TABLE identities (
    id            uuid PRIMARY KEY,
    number        text NOT NULL UNIQUE CHECK (number ~ '^[1-9][0-9]{5,14}$'),
    kind          text NOT NULL CHECK (kind IN ('person', 'agent')),
    display_name  text NOT NULL CHECK (char_length(display_name) BETWEEN 1 AND 100),
    owner_id      uuid REFERENCES identities (id),
    public_key    bytea CHECK (public_key IS NULL OR octet_length(public_key) = 32),
    created_at    timestamptz NOT NULL DEFAULT now(),
    -- Only agents have owners, and an identity never owns itself.
    CHECK (owner_id IS NULL OR (kind = 'agent' AND owner_id <> id))
);
CREATE INDEX identities_owner_idx ON identities (owner_id) WHERE owner_id IS NOT NULL;

CREATE TABLE invites (
    id          uuid PRIMARY KEY,
    code_hash   bytea NOT NULL UNIQUE CHECK (octet_length(code_hash) = 32),
    created_at  timestamptz NOT NULL DEFAULT now(),
    used_at     timestamptz,
    used_by     uuid REFERENCES identities (id),
    CHECK ((used_at IS NULL) = (used_by IS NULL))
);

-- Only the SHA-256 of a token's secret is stored.
CREATE TABLE tokens (
    id           uuid PRIMARY KEY,
    identity_id  uuid NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    secret_hash  bytea NOT NULL UNIQUE CHECK (octet_length(secret_hash) = 32),
    scopes       text[] NOT NULL CHECK (
                     cardinality(scopes) >= 1
                     AND scopes <@ ARRAY['read', 'write', 'contacts']::text[]
                 ),
    -- NULL: every room the identity can reach; otherwise only these rooms.
    room_ids     uuid[] CHECK (room_ids IS NULL OR cardinality(room_ids) >= 1),
    label        text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);
CREATE INDEX tokens_identity_idx ON tokens (identity_id);

CREATE TABLE rooms (
    id          uuid PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('direct', 'group')),
    name        text CHECK (name IS NULL OR char_length(name) BETWEEN 1 AND 100),
    created_by  uuid NOT NULL REFERENCES identities (id),
    -- The last committed seq; bumped under this row's lock in the inserting
    -- transaction, so committed seqs are gapless and in commit order.
    last_seq    bigint NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'group') = (name IS NOT NULL))
);

CREATE TABLE room_members (
    room_id      uuid NOT NULL REFERENCES rooms (id) ON DELETE CASCADE,
    identity_id  uuid NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    joined_at    timestamptz NOT NULL DEFAULT now(),
    -- Membership has ended when left_at is set; a rejoin clears it.
    left_at      timestamptz,
    PRIMARY KEY (room_id, identity_id)
);
CREATE INDEX room_members_identity_idx ON room_members (identity_id) WHERE left_at IS NULL;

CREATE TABLE contact_requests (
    id            uuid PRIMARY KEY,
    requester_id  uuid NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    target_id     uuid NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    state         text NOT NULL CHECK (state IN ('pending', 'accepted', 'declined', 'withdrawn')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    decided_at    timestamptz,
    CHECK (requester_id <> target_id),
    CHECK ((state = 'pending') = (decided_at IS NULL))
);
-- At most one open request per ordered pair.
CREATE UNIQUE INDEX contact_requests_pending_idx
    ON contact_requests (requester_id, target_id) WHERE state = 'pending';
CREATE INDEX contact_requests_target_idx ON contact_requests (target_id) WHERE state = 'pending';

-- An accepted pair, stored once with identity_a < identity_b, and its direct room.
CREATE TABLE contacts (
    identity_a  uuid NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    identity_b  uuid NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    room_id     uuid NOT NULL UNIQUE REFERENCES rooms (id),
    state       text NOT NULL CHECK (state IN ('active', 'removed')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (identity_a, identity_b),
    CHECK (identity_a < identity_b)
);
CREATE INDEX contacts_b_idx ON contacts (identity_b);

CREATE TABLE blocks (
    blocker_id  uuid NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    blocked_id  uuid NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (blocker_id, blocked_id),
    CHECK (blocker_id <> blocked_id)
);

CREATE TABLE messages (
    id          uuid PRIMARY KEY,
    room_id     uuid NOT NULL REFERENCES rooms (id) ON DELETE CASCADE,
    seq         bigint NOT NULL CHECK (seq >= 1),
    sender_id   uuid NOT NULL REFERENCES identities (id),
    -- Exactly one of plain text or a sealed (end-to-end encrypted) payload.
    text        text,
    sealed      jsonb,
    ask         boolean NOT NULL DEFAULT false,
    deadline    timestamptz,
    reply_to    uuid,
    -- Written by a runtime's finish; such replies never trigger `messages`.
    by_runtime  boolean NOT NULL DEFAULT false,
    runtime_id  uuid,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (room_id, seq),
    UNIQUE (room_id, id),
    CHECK ((text IS NULL) <> (sealed IS NULL)),
    CHECK (text IS NULL OR octet_length(text) <= 65536),
    CHECK (deadline IS NULL OR ask),
    CHECK (by_runtime = (runtime_id IS NOT NULL)),
    -- A reply's parent lives in the same room.
    FOREIGN KEY (room_id, reply_to) REFERENCES messages (room_id, id)
);
CREATE INDEX messages_reply_to_idx ON messages (reply_to) WHERE reply_to IS NOT NULL;

-- The mailbox ACK: per identity and room, independent of any runtime.
CREATE TABLE mailbox_cursors (
    identity_id  uuid NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    room_id      uuid NOT NULL REFERENCES rooms (id) ON DELETE CASCADE,
    acked_seq    bigint NOT NULL DEFAULT 0 CHECK (acked_seq >= 0),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (identity_id, room_id)
);

CREATE TABLE runtimes (
    id                  uuid PRIMARY KEY,
    agent_id            uuid NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    name                text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    from_mode           text NOT NULL CHECK (from_mode IN ('now', 'beginning')),
    policy              jsonb NOT NULL,
    policy_fingerprint  text NOT NULL CHECK (policy_fingerprint ~ '^[0-9a-f]{64}$'),
    config_version      integer NOT NULL DEFAULT 1 CHECK (config_version >= 1),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (agent_id, name)
);

-- Per runtime and room: every seq up to here has been scanned into jobs.
CREATE TABLE runtime_checkpoints (
    runtime_id  uuid NOT NULL REFERENCES runtimes (id) ON DELETE CASCADE,
    room_id     uuid NOT NULL REFERENCES rooms (id) ON DELETE CASCADE,
    seq         bigint NOT NULL CHECK (seq >= 0),
    PRIMARY KEY (runtime_id, room_id)
);

-- Rooms with messages a runtime has not scanned yet; the scan reads only
-- these, so its cost follows the rooms that changed, not all rooms.
CREATE TABLE runtime_dirty_rooms (
    runtime_id  uuid NOT NULL REFERENCES runtimes (id) ON DELETE CASCADE,
    room_id     uuid NOT NULL REFERENCES rooms (id) ON DELETE CASCADE,
    marked_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (runtime_id, room_id)
);

-- One global sequence for lease versions (fencing tokens).
CREATE SEQUENCE lease_version_seq START 1;

CREATE TABLE jobs (
    id                uuid PRIMARY KEY,
    runtime_id        uuid NOT NULL REFERENCES runtimes (id) ON DELETE CASCADE,
    room_id           uuid NOT NULL,
    message_id        uuid NOT NULL,
    -- Stable per (runtime, message): the idempotency key for external work.
    job_key           text NOT NULL UNIQUE,
    state             text NOT NULL CHECK (state IN ('pending', 'claimed', 'handled', 'skipped', 'dead')),
    attempts          integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    lease_owner       text CHECK (lease_owner IS NULL OR lease_owner ~ '^[0-9a-f]{32}$'),
    lease_version     bigint CHECK (lease_version IS NULL OR lease_version >= 1),
    lease_expires_at  timestamptz,
    not_before        timestamptz,
    reason            text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (runtime_id, message_id),
    FOREIGN KEY (room_id, message_id) REFERENCES messages (room_id, id) ON DELETE CASCADE,
    -- A claimed job always carries a full lease; no other state carries one.
    CHECK ((state = 'claimed') = (lease_owner IS NOT NULL)),
    CHECK ((lease_owner IS NULL) = (lease_version IS NULL)),
    CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL)),
    CHECK (state NOT IN ('skipped', 'dead') OR reason IS NOT NULL)
);
CREATE INDEX jobs_pending_idx ON jobs (runtime_id, created_at) WHERE state = 'pending';
CREATE INDEX jobs_claimed_idx ON jobs (runtime_id, lease_expires_at) WHERE state = 'claimed';

-- One row per granted lease.
CREATE TABLE attempts (
    id              bigserial PRIMARY KEY,
    job_id          uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    runtime_id      uuid NOT NULL REFERENCES runtimes (id) ON DELETE CASCADE,
    attempt         integer NOT NULL CHECK (attempt >= 1),
    lease_owner     text NOT NULL CHECK (lease_owner ~ '^[0-9a-f]{32}$'),
    lease_version   bigint NOT NULL UNIQUE,
    claimed_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    -- NULL while running or when abandoned (crash, lost lease, release).
    outcome         text CHECK (outcome IS NULL OR outcome IN ('replied', 'skipped', 'failed')),
    ended           text CHECK (ended IS NULL OR ended IN ('finished', 'expired', 'released')),
    error           text,
    -- Usage is NULL unless the handler reported it: unknown is never zero.
    model_calls     bigint CHECK (model_calls IS NULL OR model_calls >= 0),
    input_tokens    bigint CHECK (input_tokens IS NULL OR input_tokens >= 0),
    output_tokens   bigint CHECK (output_tokens IS NULL OR output_tokens >= 0),
    CHECK ((outcome IS NULL) = (finished_at IS NULL)),
    CHECK ((model_calls IS NULL) = (input_tokens IS NULL) AND (input_tokens IS NULL) = (output_tokens IS NULL))
);
CREATE INDEX attempts_job_idx ON attempts (job_id);
CREATE INDEX attempts_runtime_idx ON attempts (runtime_id);

-- The committed result of a job; a retry with the same fingerprint returns it.
CREATE TABLE completions (
    job_id            uuid PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    fingerprint       text NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
    lease_version     bigint NOT NULL,
    reply_message_id  uuid REFERENCES messages (id),
    outcome           jsonb NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);

-- Each granted lease costs one unit of maxCallsPerHour (rolling window).
CREATE TABLE budget_units (
    id          bigserial PRIMARY KEY,
    runtime_id  uuid NOT NULL REFERENCES runtimes (id) ON DELETE CASCADE,
    granted_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX budget_units_window_idx ON budget_units (runtime_id, granted_at);

CREATE TABLE notes (
    id                  uuid PRIMARY KEY,
    runtime_id          uuid NOT NULL REFERENCES runtimes (id) ON DELETE CASCADE,
    room_id             uuid NOT NULL REFERENCES rooms (id) ON DELETE CASCADE,
    note_key            text NOT NULL CHECK (note_key ~ '^[A-Za-z0-9._:-]{1,64}$'),
    text                text NOT NULL CHECK (octet_length(text) BETWEEN 1 AND 4000),
    version             integer NOT NULL CHECK (version >= 1),
    source_message_ids  uuid[] NOT NULL DEFAULT '{}' CHECK (cardinality(source_message_ids) <= 8),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (runtime_id, room_id, note_key)
);

CREATE TABLE runtime_log (
    id          bigserial PRIMARY KEY,
    runtime_id  uuid NOT NULL REFERENCES runtimes (id) ON DELETE CASCADE,
    at          timestamptz NOT NULL DEFAULT now(),
    kind        text NOT NULL,
    job_key     text,
    room_id     uuid,
    message_id  uuid,
    detail      jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX runtime_log_runtime_idx ON runtime_log (runtime_id, id DESC);

-- Events that must reach listeners, written in the committing transaction and
-- turned into NOTIFY/socket signals by a dispatcher (leftovers after a crash too).
CREATE TABLE outbox (
    id            bigserial PRIMARY KEY,
    kind          text NOT NULL CHECK (kind IN ('inbox_changed')),
    identity_ids  uuid[] NOT NULL CHECK (cardinality(identity_ids) >= 1),
    created_at    timestamptz NOT NULL DEFAULT now()
);
