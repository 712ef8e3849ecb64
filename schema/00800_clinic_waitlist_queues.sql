-- +goose Up
-- One row per clinic waitlist: a doctor's line. It numbers the waiters
-- (last_seq: the number the latest join was given) and is the lock that
-- orders the line: a join, a leave and an offer lock it first, so waiters are
-- numbered in commit order and offers of one doctor never interleave
-- (docs/adr/0015-clinic-waitlist.md).
CREATE TABLE clinic_waitlist_queues (
    clinic_id   UUID NOT NULL,
    doctor_id   UUID NOT NULL,
    home_region TEXT NOT NULL,
    last_seq    INT8 NOT NULL,
    PRIMARY KEY (clinic_id, doctor_id)
);

-- +goose Down
DROP TABLE clinic_waitlist_queues;
