// Package schema embeds Berth's SQL migrations: the portable schema shared by
// PostgreSQL and CockroachDB (one DDL statement per step, applied in order),
// and the CockroachDB-only overlay in cockroach/ (multi-region localities),
// applied only when the server is CockroachDB.
package schema

import "embed"

// Migrations holds the portable migrations, NNNNN_name.sql in goose format.
//
//go:embed *.sql
var Migrations embed.FS

// Cockroach holds the CockroachDB overlay: idempotent statements, one per
// file, in which {{database}} stands for the database name.
//
//go:embed cockroach/*.sql
var Cockroach embed.FS
