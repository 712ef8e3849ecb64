-- +goose Up
-- One row per waitlist: a hotel's room type. It numbers the waiters
-- (last_seq: the number the latest join was given) and is the lock that orders a waitlist: a join, a leave and an
-- offer lock it first, so waiters are numbered in commit order and offers of
-- one waitlist never interleave (docs/adr/0013-waitlist.md).
CREATE TABLE waitlist_queues (
    hotel_id     UUID NOT NULL,
    room_type_id UUID NOT NULL,
    home_region  TEXT NOT NULL,
    last_seq     INT8 NOT NULL,
    PRIMARY KEY (hotel_id, room_type_id)
);

-- +goose Down
DROP TABLE waitlist_queues;
