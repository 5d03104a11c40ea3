CREATE TABLE outbox (
    id            bigserial PRIMARY KEY,
    kind          text NOT NULL CHECK (kind IN ('inbox_changed')),
    identity_ids  uuid[] NOT NULL CHECK (cardinality(identity_ids) >= 1),
    created_at    timestamptz NOT NULL DEFAULT now()
);
