-- The `n`th id (from 0) of a set of new rows made together, as a UUIDv7
-- (RFC 9562) whose ids increase with `n`: the millisecond time field is
-- `base_ms` plus `n / 4096`, the 12-bit `rand_a` field a counter
-- (`n % 4096`, the RFC's "fixed-length dedicated counter"), the rest
-- random. A claim's scan writes its new jobs with these ids in the order
-- they are to be claimed (rooms taking turns), since jobs of one scan share
-- their transaction's `created_at` and are claimed by `(created_at, id)`.
CREATE FUNCTION relayger_ordered_uuid(base_ms bigint, n bigint) RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(
        substring(int8send(base_ms + n / 4096) FROM 3 FOR 6)
        || substring(int4send((28672 | (n % 4096))::integer) FROM 3 FOR 2)
        || substring(uuid_send(gen_random_uuid()) FROM 9 FOR 8),
        'hex')::uuid
$$;
