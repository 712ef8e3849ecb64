// Package api holds Berth's OpenAPI description.
package api

import _ "embed"

// OpenAPI is api/openapi.yaml, the OpenAPI 3.1 copy of the HTTP contract
// (API.md).
//
//go:embed openapi.yaml
var OpenAPI []byte
