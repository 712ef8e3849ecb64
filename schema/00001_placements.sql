-- +goose Up
-- The placement directory: one row per partition naming its home region.
-- Every write transaction reads its partition's row FOR SHARE (the fence);
-- a move locks it FOR UPDATE and bumps version. GLOBAL on CockroachDB.
CREATE TABLE placements (
    kind         TEXT        NOT NULL CHECK (kind IN ('hotel', 'clinic')),
    partition_id UUID        NOT NULL,
    home_region  TEXT        NOT NULL,
    version      INT8        NOT NULL DEFAULT 1,
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, partition_id)
);

-- +goose Down
DROP TABLE placements;
