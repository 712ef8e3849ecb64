-- +goose Up
CREATE TABLE hotels (
    hotel_id    UUID        NOT NULL,
    home_region TEXT        NOT NULL,
    name        TEXT        NOT NULL,
    city        TEXT        NOT NULL,
    -- city folded to lower case without accents by the application, for search.
    city_key    TEXT        NOT NULL,
    country     TEXT        NOT NULL,
    timezone    TEXT        NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (hotel_id)
);

-- +goose Down
DROP TABLE hotels;
