ALTER TABLE attempts
    DROP CONSTRAINT attempts_answer_check,
    DROP CONSTRAINT attempts_fingerprint_check,
    ALTER COLUMN fingerprint TYPE text USING encode(fingerprint, 'hex');
UPDATE attempts
SET finish_response = jsonb_strip_nulls(jsonb_build_object(
        'outcome', outcome::text, 'replyMessageId', reply_message_id))
WHERE outcome IN ('replied', 'handled', 'skipped');
