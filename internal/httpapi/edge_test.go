package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/google/uuid"
)

// rawRequest is a request built field by field, so that it can carry bytes
// an HTTP client refuses to send (a NUL in a header) — what a proxy or an
// in-process caller could still hand the handler.
type rawRequest struct {
	method, path, query string
	header              http.Header
	body                []byte
}

// serveRaw runs req through the server's handler and returns the answer.
func serveRaw(env *bookingtest.Env, req rawRequest) bookingtest.Response {
	r := httptest.NewRequest(http.MethodGet, "/", bytes.NewReader(req.body))
	r.Method = req.method
	r.URL = &url.URL{Path: req.path, RawQuery: req.query}
	r.RequestURI = r.URL.RequestURI()
	for k, vs := range req.header {
		r.Header[k] = vs
	}
	if len(req.body) > 0 && r.Header.Get("Content-Type") == "" {
		r.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	env.Server.Config.Handler.ServeHTTP(rec, r)
	return bookingtest.Response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
}

// Finding 5 of issue 13: NUL bytes, other control characters and invalid
// UTF-8 — in a JSON string, a path segment, the query or a header — are
// client input, never an outage: each is a 400 invalid_request problem, and
// nothing in the database changes. (Before, a NUL in contact_email was a 500
// and a NUL in a webhook event id a 500.)
func TestHostileBytesAreInvalidRequest(t *testing.T) {
	t.Parallel()
	var clinics *postgres.ClinicStore
	env := bookingtest.Start(t, bookingtest.Options{Configure: func(cfg *httpapi.Config, st *postgres.Store) {
		clinics = postgres.NewClinicStore(st, 5*time.Minute)
		cfg.Clinics = clinics
		cfg.Payments = httpapi.NewPaymentWebhook(webhookSecret, st)
	}})
	h := env.SeedHotel("", 5, 0, bookingtest.Date(1), bookingtest.Date(30))
	alice := env.Token("alice", berth.RoleGuest)
	admin := env.Admin()
	held := holdFor(t, env, h, "alice")
	holdPath := "/v1/hotels/" + h.ID + "/reservations"
	hold := func(over map[string]any) string {
		b := map[string]any{"guest_id": "alice", "room_type_id": h.RoomTypeID,
			"check_in": bookingtest.Date(10), "check_out": bookingtest.Date(12), "quantity": 1}
		for k, v := range over {
			b[k] = v
		}
		return mustJSON(b)
	}
	bearer := func(tok string) http.Header {
		return http.Header{"Authorization": {"Bearer " + tok}, "Idempotency-Key": {bookingtest.NewKey()}}
	}
	webhook := func(id string) rawRequest {
		body, _ := json.Marshal(map[string]any{"id": id, "type": "payment.succeeded", "data": map[string]any{
			"kind": "hotel", "partition_id": h.ID, "reservation_id": held, "payment_ref": "pi_1", "amount_cents": 20000}})
		return rawRequest{method: "POST", path: "/v1/payments/webhook", body: body,
			header: http.Header{"Berth-Signature": {payments.Sign([]byte(webhookSecret), time.Now(), body)}}}
	}
	stay := "check_in=" + bookingtest.Date(10) + "&check_out=" + bookingtest.Date(12)
	cases := map[string]rawRequest{
		"NUL in contact_email":          {method: "POST", path: holdPath, header: bearer(alice), body: []byte(hold(map[string]any{"contact_email": "a\x00@example.com"}))},
		"NUL in contact_phone":          {method: "POST", path: holdPath, header: bearer(alice), body: []byte(hold(map[string]any{"contact_phone": "+49\x00"}))},
		"escape in a hotel name":        {method: "POST", path: "/v1/hotels", header: bearer(admin), body: []byte(`{"name":"H\u001b[31m","city":"C","country":"DE","timezone":"Europe/Berlin","home_region":"us-east"}`)},
		"invalid UTF-8 in a JSON value": {method: "POST", path: holdPath, header: bearer(admin), body: []byte(strings.Replace(hold(nil), `"alice"`, "\"ali\xffce\"", 1))},
		"invalid UTF-8 in a JSON key":   {method: "POST", path: holdPath, header: bearer(admin), body: []byte(strings.Replace(hold(nil), `"quantity"`, "\"quant\xffity\"", 1))},
		"NUL in a path segment":         {method: "GET", path: "/v1/hotels/\x00"},
		"invalid UTF-8 in a path":       {method: "GET", path: "/v1/hotels/" + h.ID + "/reservations/\xff"},
		"NUL in a query value":          {method: "GET", path: "/v1/hotels", query: "city=%00&" + stay},
		"control character in a query":  {method: "GET", path: "/v1/hotels/" + h.ID + "/availability", query: stay + "&room_type_id=%07"},
		"invalid UTF-8 in a query key":  {method: "GET", path: "/v1/hotels/" + h.ID + "/availability", query: stay + "&%ff=1"},
		"malformed query escape":        {method: "GET", path: "/v1/hotels/" + h.ID + "/availability", query: stay + "&x=%zz"},
		"NUL in Idempotency-Key":        {method: "POST", path: holdPath, header: http.Header{"Authorization": {"Bearer " + alice}, "Idempotency-Key": {"k\x00"}}, body: []byte(hold(nil))},
		"NUL in Authorization":          {method: "POST", path: holdPath, header: http.Header{"Authorization": {"Bearer \x00" + alice}, "Idempotency-Key": {bookingtest.NewKey()}}, body: []byte(hold(nil))},
		"NUL in another header":         {method: "GET", path: "/v1/hotels/" + h.ID, header: http.Header{"X-Trace": {"a\x00b"}}},
		"invalid UTF-8 in a header":     {method: "GET", path: "/v1/hotels/" + h.ID, header: http.Header{"X-Trace": {"a\xffb"}}},
		"NUL in a webhook event id":     webhook("evt_\x00"),
		"escape in a webhook event id":  webhook("evt_\u001b"),
	}
	before := env.MustSnapshot()
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			r := serveRaw(env, req)
			if r.Status != http.StatusBadRequest || r.Code() != "invalid_request" {
				t.Fatalf("got %d %s, want 400 invalid_request", r.Status, truncate(r.Body))
			}
			if ct := r.Header.Get("Content-Type"); ct != httpapi.ProblemContentType {
				t.Fatalf("Content-Type %q, want a problem document", ct)
			}
			if bytes.ContainsRune(r.Body, 0) || !json.Valid(r.Body) {
				t.Fatalf("the problem document echoes the hostile bytes: %q", r.Body)
			}
		})
	}
	if after := env.MustSnapshot(); after != before {
		t.Fatal("a refused request changed the database")
	}
	// The same requests, cleaned, pass: the check refuses bytes, not routes.
	if r := serveRaw(env, rawRequest{method: "POST", path: holdPath, header: bearer(alice),
		body: []byte(hold(map[string]any{"contact_email": "a@example.com", "contact_phone": "+49 30 1234"}))}); r.Status != http.StatusCreated {
		t.Fatalf("a clean hold: %d %s", r.Status, r.Body)
	}
	if r := serveRaw(env, rawRequest{method: "GET", path: "/v1/hotels", query: "city=M%C3%BAnich&" + stay}); r.Status != http.StatusOK {
		t.Fatalf("a clean search with UTF-8: %d %s", r.Status, r.Body)
	}
}

// Finding 7 of issue 13: errors[] is capped. Thousands of bad query
// parameters (or one enormous name) get a short answer that says how many
// errors were left out, on every route that lists field errors.
func TestFieldErrorsAreCapped(t *testing.T) {
	t.Parallel()
	ce := startClinics(t, 5*time.Minute)
	h := ce.SeedHotel("", 5, 0, bookingtest.Date(1), bookingtest.Date(30))
	clinicID := ce.seedClinic("Europe/Berlin")
	doctorID := ce.seedDoctor(clinicID, 30, false, allWeek("09:00", "10:00"))
	var many strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&many, "&param%04d=%d", i, i)
	}
	routes := map[string]string{
		"availability": "/v1/hotels/" + h.ID + "/availability?check_in=x" + many.String(),
		"search":       "/v1/hotels?city=x" + many.String(),
		"slots":        "/v1/clinics/" + clinicID + "/doctors/" + doctorID + "/slots?date=x" + many.String(),
		"one huge key": "/v1/hotels/" + h.ID + "/availability?" + strings.Repeat("k", 30000) + "=1",
	}
	for name, path := range routes {
		t.Run(name, func(t *testing.T) {
			r := ce.Do(bookingtest.Request{Method: "GET", Path: path})
			if r.Status != http.StatusBadRequest || r.Code() != "invalid_request" {
				t.Fatalf("got %d %s", r.Status, truncate(r.Body))
			}
			if len(r.Body) > 4096 {
				t.Fatalf("a %d-byte answer to a bad query", len(r.Body))
			}
			var doc struct {
				Detail  string             `json:"detail"`
				Errors  []berth.FieldError `json:"errors"`
				Omitted *int               `json:"errors_omitted"`
			}
			if err := json.Unmarshal(r.Body, &doc); err != nil {
				t.Fatal(err)
			}
			if len(doc.Errors) == 0 || len(doc.Errors) > httpapi.MaxFieldErrors {
				t.Fatalf("%d entries in errors[], want 1 to %d", len(doc.Errors), httpapi.MaxFieldErrors)
			}
			if name == "one huge key" {
				return
			}
			if doc.Omitted == nil || *doc.Omitted < 2000-httpapi.MaxFieldErrors || !strings.Contains(doc.Detail, "omitted") {
				t.Fatalf("the answer does not say errors were omitted: %s", truncate(r.Body))
			}
		})
	}
}

// Finding 5 of issue 13: a request id reaching the store is not where input
// is judged; a unknown route with hostile bytes is a 400 too, not a 404 that
// echoes them.
func TestHostileBytesOnUnknownRoutes(t *testing.T) {
	t.Parallel()
	env := bookingtest.Start(t, bookingtest.Options{})
	r := serveRaw(env, rawRequest{method: "GET", path: "/v1/" + uuid.NewString() + "/\x01"})
	if r.Status != http.StatusBadRequest || r.Code() != "invalid_request" {
		t.Fatalf("got %d %s, want 400", r.Status, r.Body)
	}
}
