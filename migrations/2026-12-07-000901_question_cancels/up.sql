-- A question its asker canceled (`DELETE /v1/rooms/{room}/messages/{id}/ask`):
-- one row a question, the message itself unchanged. The cancel ends the
-- jobs already made of it (a pending one is skipped `canceled`; a claimed
-- one too, its attempt ended `canceled`, so its holder's next heartbeat or
-- finish is refused), and a claim skips a job of it made later
-- (relayger_core::policy::SkipReason::Canceled).
CREATE TABLE question_cancels (
    room_id     uuid NOT NULL,
    message_id  uuid NOT NULL,
    canceled_by uuid NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    canceled_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (room_id, message_id),
    FOREIGN KEY (room_id, message_id) REFERENCES messages (room_id, id) ON DELETE CASCADE
);

ALTER DOMAIN attempt_end DROP CONSTRAINT attempts_ended_check;
ALTER DOMAIN attempt_end ADD CONSTRAINT attempts_ended_check
    CHECK (VALUE IN ('finished', 'expired', 'released', 'canceled'));
ALTER DOMAIN attempt_end_event DROP CONSTRAINT attempts_end_event_check;
ALTER DOMAIN attempt_end_event ADD CONSTRAINT attempts_end_event_check
    CHECK (VALUE IN ('replied', 'skipped', 'failed', 'expired', 'dead_letter', 'released',
                     'canceled'));
ALTER TABLE runtime_log DROP CONSTRAINT runtime_log_kind_check;
ALTER TABLE runtime_log ADD CONSTRAINT runtime_log_kind_check CHECK (kind IN (
    'registered', 'configured', 'claimed', 'replied', 'skipped', 'failed',
    'expired', 'dead_letter', 'released', 'retried', 'canceled'));
