-- The runtime's last hour, one row per minute, oldest first, every minute
-- present: leases granted (by their claim), attempts ended (by their end:
-- completed, failed or expired, skipped by the handler), jobs the policy
-- skipped at claim time (their log rows), and the question → reply time of
-- the replies written (median and longest, in milliseconds). Only jobs of
-- rooms the agent is still a member of and the token may see. Reads what
-- the job path already writes; writes nothing.
--
-- $1 runtime_id: the runtime
-- $2 agent_id: the runtime's agent
-- $3 rooms: the token's room restriction, NULL for none
-- $4 minutes: how many minutes, the current one included
WITH visible AS (
    SELECT m.room_id FROM room_members m
    WHERE m.identity_id = $2::uuid AND m.left_at IS NULL
      AND ($3::uuid[] IS NULL OR m.room_id = ANY($3::uuid[]))
), window_minutes AS (
    SELECT generate_series(date_trunc('minute', now()) - ($4::integer - 1) * interval '1 minute',
                           date_trunc('minute', now()),
                           interval '1 minute') AS minute
), window_start AS (
    SELECT min(minute) AS since FROM window_minutes
), claims AS (
    SELECT date_trunc('minute', a.claimed_at) AS minute, count(*) AS claimed
    FROM attempts a JOIN jobs j ON j.id = a.job_id
    WHERE a.runtime_id = $1::uuid
      AND a.claimed_at >= (SELECT since FROM window_start)
      AND j.room_id IN (SELECT room_id FROM visible)
    GROUP BY 1
), ends AS (
    SELECT date_trunc('minute', a.ended_at) AS minute,
           count(*) FILTER (WHERE a.end_event = 'replied') AS answered,
           count(*) FILTER (WHERE a.end_event IN ('failed', 'expired', 'dead_letter')) AS failed,
           count(*) FILTER (WHERE a.end_event = 'skipped') AS skipped,
           count(q.created_at) AS replies,
           percentile_cont(0.5) WITHIN GROUP (
               ORDER BY extract(epoch FROM r.created_at - q.created_at) * 1000) AS latency_median_ms,
           max(extract(epoch FROM r.created_at - q.created_at) * 1000) AS latency_max_ms
    FROM attempts a
    JOIN jobs j ON j.id = a.job_id
    LEFT JOIN messages r ON r.room_id = a.reply_room_id AND r.id = a.reply_message_id
    LEFT JOIN messages q ON r.id IS NOT NULL AND q.room_id = j.room_id AND q.id = j.message_id
    WHERE a.runtime_id = $1::uuid
      AND a.ended_at >= (SELECT since FROM window_start)
      AND j.room_id IN (SELECT room_id FROM visible)
    GROUP BY 1
), policy_skips AS (
    SELECT date_trunc('minute', l.at) AS minute, count(*) AS skipped
    FROM runtime_log l
    WHERE l.runtime_id = $1::uuid AND l.kind = 'skipped'
      AND l.at >= (SELECT since FROM window_start)
      AND (l.room_id IS NULL OR l.room_id IN (SELECT room_id FROM visible))
    GROUP BY 1
)
SELECT w.minute AS at,
       COALESCE(c.claimed, 0) AS claimed,
       COALESCE(e.answered, 0) AS answered,
       COALESCE(e.failed, 0) AS failed,
       COALESCE(e.skipped, 0) + COALESCE(s.skipped, 0) AS skipped,
       COALESCE(e.replies, 0) AS replies,
       round(e.latency_median_ms)::bigint AS latency_median_ms,
       round(e.latency_max_ms)::bigint AS latency_max_ms
FROM window_minutes w
LEFT JOIN claims c ON c.minute = w.minute
LEFT JOIN ends e ON e.minute = w.minute
LEFT JOIN policy_skips s ON s.minute = w.minute
ORDER BY w.minute
