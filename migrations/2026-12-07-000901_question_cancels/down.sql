UPDATE attempts SET ended = 'released', end_event = 'released' WHERE ended = 'canceled';
DELETE FROM runtime_log WHERE kind = 'canceled';
ALTER TABLE runtime_log DROP CONSTRAINT runtime_log_kind_check;
ALTER TABLE runtime_log ADD CONSTRAINT runtime_log_kind_check CHECK (kind IN (
    'registered', 'configured', 'claimed', 'replied', 'skipped', 'failed',
    'expired', 'dead_letter', 'released', 'retried'));
ALTER DOMAIN attempt_end_event DROP CONSTRAINT attempts_end_event_check;
ALTER DOMAIN attempt_end_event ADD CONSTRAINT attempts_end_event_check
    CHECK (VALUE IN ('replied', 'skipped', 'failed', 'expired', 'dead_letter', 'released'));
ALTER DOMAIN attempt_end DROP CONSTRAINT attempts_ended_check;
ALTER DOMAIN attempt_end ADD CONSTRAINT attempts_ended_check
    CHECK (VALUE IN ('finished', 'expired', 'released'));
DROP TABLE question_cancels;
