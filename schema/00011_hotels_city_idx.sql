-- +goose Up
CREATE INDEX hotels_city_key_idx ON hotels (city_key);

-- +goose Down
DROP INDEX hotels_city_key_idx;
