package readmodel_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/readmodel"
)

// Finding 5 of issue 13: a NUL (or invalid UTF-8) in a guest id is the
// client's input, not an outage. It was a 503 "the read model is
// unavailable" because PostgreSQL refuses such text; it is a 400
// invalid_request now, while the same server still answers clean ids.
func TestHostileGuestIDIsInvalidRequest(t *testing.T) {
	t.Parallel()
	db, _ := dbtest.New(t, postgres.Options{})
	tokens, err := auth.New("readmodel-test-secret-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	store := postgres.NewReadModel(db)
	srv := httptest.NewServer(readmodel.NewServer(readmodel.ServerConfig{Store: store, Tokens: tokens, CursorKey: []byte("k")}))
	t.Cleanup(srv.Close)
	admin, err := tokens.Mint(berth.Principal{Subject: "admin", Role: berth.RoleAdmin}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var doc map[string]any
		_ = json.Unmarshal(body, &doc)
		return resp.StatusCode, doc
	}
	for _, path := range []string{
		"/v1/guests/%00/reservations",
		"/v1/guests/alice%00/reservations",
		"/v1/guests/ali%FFce/reservations",
		"/v1/guests/alice%07/reservations",
		"/v1/guests/alice/reservations?kind=%00",
		"/v1/guests/alice/reservations?x=%zz",
	} {
		status, doc := get(path)
		if status != http.StatusBadRequest || doc["code"] != "invalid_request" {
			t.Errorf("GET %s: %d %v, want 400 invalid_request", path, status, doc)
		}
	}
	if status, doc := get("/v1/guests/alice/reservations"); status != http.StatusOK {
		t.Fatalf("a clean guest id: %d %v", status, doc)
	}
}
