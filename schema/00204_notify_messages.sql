-- +goose Up
-- Notification messages, one per (message key, channel): the key is the event
-- id (or reminder:<kind>:<id>:<start>). A sender claims a row by moving it to
-- 'sending' and committing before it sends, so a message is sent at most once
-- per channel; a send that reports failure goes back to 'pending' with a backoff.
CREATE TABLE notify_messages (
    message_key     TEXT        NOT NULL,
    channel         TEXT        NOT NULL,
    template        TEXT        NOT NULL,
    recipient       TEXT        NOT NULL,
    guest_id        TEXT        NOT NULL,
    subject         TEXT        NOT NULL,
    body            TEXT        NOT NULL,
    status          TEXT        NOT NULL CHECK (status IN ('pending', 'sending', 'sent', 'failed')),
    attempts        INT4        NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_error      TEXT,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    sent_at         TIMESTAMPTZ,
    PRIMARY KEY (message_key, channel)
);

-- +goose Down
DROP TABLE notify_messages;
