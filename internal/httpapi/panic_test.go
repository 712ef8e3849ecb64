package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Rendering an answer never panics on data (finding 9 of issue 13: it once
// went through mustJSON, inside the write transaction): a value that cannot
// be encoded is a 500 problem, which the store takes as a failed write.
func TestRenderNeverPanics(t *testing.T) {
	t.Parallel()
	for name, v := range map[string]any{
		"a channel": make(chan int),
		"NaN":       map[string]float64{"x": math.NaN()},
		"a func":    struct{ F func() }{F: func() {}},
	} {
		status, body := render(http.StatusCreated)(v, nil)
		if status != http.StatusInternalServerError || !json.Valid(body) {
			t.Errorf("%s: %d %s, want a 500 problem", name, status, body)
		}
	}
	if status, body := render(http.StatusCreated)(map[string]int{"n": 1}, nil); status != http.StatusCreated || string(body) != `{"n":1}` {
		t.Fatalf("a plain value: %d %s", status, body)
	}
}

// A panic in a handler is answered with a 500 problem document, the
// process goes on serving.
func TestPanicIsProblem(t *testing.T) {
	t.Parallel()
	s := New(Config{Region: "us-east", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.mux.HandleFunc("GET /boom", func(http.ResponseWriter, *http.Request) { panic("boom") })
	for range 2 {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/boom", nil))
		var doc map[string]any
		if rec.Code != http.StatusInternalServerError || rec.Header().Get("Content-Type") != ProblemContentType ||
			json.Unmarshal(rec.Body.Bytes(), &doc) != nil || doc["code"] != "internal" {
			t.Fatalf("got %d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("after a panic /healthz answers %d", rec.Code)
	}
}
