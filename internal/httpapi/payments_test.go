package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/google/uuid"
)

const webhookSecret = "whsec-test-0123456789abcdef"

func startWithWebhook(t *testing.T) *bookingtest.Env {
	t.Helper()
	return bookingtest.Start(t, bookingtest.Options{Configure: func(c *httpapi.Config, s *postgres.Store) {
		c.Payments = httpapi.NewPaymentWebhook(webhookSecret, s)
	}})
}

func paymentBody(t *testing.T, id, typ string, h bookingtest.Hotel, reservationID string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"id": id, "type": typ, "data": map[string]any{
		"kind": "hotel", "partition_id": h.ID, "reservation_id": reservationID, "payment_ref": "pi_" + id, "amount_cents": 20000, "currency": "EUR"}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sendWebhook(e *bookingtest.Env, body []byte, sig string) bookingtest.Response {
	hdr := map[string]string{}
	if sig != "" {
		hdr["Berth-Signature"] = sig
	}
	return e.Do(bookingtest.Request{Method: "POST", Path: "/v1/payments/webhook", Body: body, Header: hdr})
}

func holdFor(t *testing.T, e *bookingtest.Env, h bookingtest.Hotel, guest string) string {
	t.Helper()
	r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", Token: e.Token(guest, berth.RoleGuest),
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": guest, "room_type_id": h.RoomTypeID,
			"check_in": bookingtest.Date(5), "check_out": bookingtest.Date(7), "quantity": 1}})
	if r.Status != http.StatusCreated {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	return r.JSON()["reservation_id"].(string)
}

func reservationState(t *testing.T, e *bookingtest.Env, h bookingtest.Hotel, id string) (string, int64) {
	t.Helper()
	var (
		status  string
		version int64
	)
	if err := dbtest.SQL(e.DB).QueryRow(context.Background(), `SELECT status, version FROM reservations WHERE hotel_id = $1 AND reservation_id = $2`,
		h.ID, id).Scan(&status, &version); err != nil {
		t.Fatal(err)
	}
	return status, version
}

func outboxCount(t *testing.T, e *bookingtest.Env) int {
	t.Helper()
	var n int
	if err := dbtest.SQL(e.DB).QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPaymentWebhook(t *testing.T) {
	e := startWithWebhook(t)
	h := e.SeedHotel("", 3, 0, bookingtest.Date(0), bookingtest.Date(30))
	secret := []byte(webhookSecret)

	t.Run("signed payment.succeeded confirms; a replay changes nothing", func(t *testing.T) {
		id := holdFor(t, e, h, "g-pay")
		body := paymentBody(t, "evt_"+uuid.NewString(), "payment.succeeded", h, id)
		r := sendWebhook(e, body, payments.Sign(secret, time.Now(), body))
		if r.Status != http.StatusOK || r.JSON()["status"] != "confirmed" {
			t.Fatalf("webhook: %d %s", r.Status, r.Body)
		}
		status, version := reservationState(t, e, h, id)
		if status != "confirmed" {
			t.Fatalf("status %s, want confirmed", status)
		}
		events := outboxCount(t, e)
		// The provider redelivers (new timestamp, same event).
		again := sendWebhook(e, body, payments.Sign(secret, time.Now().Add(time.Second), body))
		if again.Status != http.StatusOK || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(r.Body) {
			t.Fatalf("replay: %d %v %s", again.Status, again.Header, again.Body)
		}
		if s2, v2 := reservationState(t, e, h, id); s2 != status || v2 != version {
			t.Fatalf("replay changed the reservation: %s v%d → %s v%d", status, version, s2, v2)
		}
		if n := outboxCount(t, e); n != events {
			t.Fatalf("replay wrote %d event(s)", n-events)
		}
	})

	t.Run("bad, stale, missing signatures and a tampered body are 401", func(t *testing.T) {
		id := holdFor(t, e, h, "g-bad")
		body := paymentBody(t, "evt_"+uuid.NewString(), "payment.succeeded", h, id)
		tampered := []byte(strings.Replace(string(body), `"amount_cents":20000`, `"amount_cents":1`, 1))
		cases := map[string]struct {
			body []byte
			sig  string
		}{
			"wrong secret":  {body, payments.Sign([]byte("another-secret-0123456789"), time.Now(), body)},
			"stale":         {body, payments.Sign(secret, time.Now().Add(-6*time.Minute), body)},
			"future":        {body, payments.Sign(secret, time.Now().Add(6*time.Minute), body)},
			"tampered body": {tampered, payments.Sign(secret, time.Now(), body)},
			"missing":       {body, ""},
			"garbage":       {body, "t=abc,v1=zz"},
			"no v1":         {body, "t=" + time.Now().Format("0")},
		}
		for name, c := range cases {
			r := sendWebhook(e, c.body, c.sig)
			if r.Status != http.StatusUnauthorized || r.Code() != "unauthorized" {
				t.Errorf("%s: %d %s, want 401", name, r.Status, r.Body)
			}
		}
		if status, _ := reservationState(t, e, h, id); status != "held" {
			t.Fatalf("a refused webhook changed the reservation to %s", status)
		}
	})

	t.Run("payment.failed releases the hold", func(t *testing.T) {
		id := holdFor(t, e, h, "g-fail")
		body := paymentBody(t, "evt_"+uuid.NewString(), "payment.failed", h, id)
		r := sendWebhook(e, body, payments.Sign(secret, time.Now(), body))
		if r.Status != http.StatusOK {
			t.Fatalf("webhook: %d %s", r.Status, r.Body)
		}
		if status, _ := reservationState(t, e, h, id); status != "cancelled" {
			t.Fatalf("status %s, want cancelled", status)
		}
		e.AssertInventory() // the nights and the guest's hold count came back
	})

	t.Run("payment.failed after confirmation changes nothing", func(t *testing.T) {
		id := holdFor(t, e, h, "g-late")
		ok := paymentBody(t, "evt_"+uuid.NewString(), "payment.succeeded", h, id)
		sendWebhook(e, ok, payments.Sign(secret, time.Now(), ok))
		failed := paymentBody(t, "evt_"+uuid.NewString(), "payment.failed", h, id)
		if r := sendWebhook(e, failed, payments.Sign(secret, time.Now(), failed)); r.Status != http.StatusOK {
			t.Fatalf("webhook: %d %s", r.Status, r.Body)
		}
		if status, _ := reservationState(t, e, h, id); status != "confirmed" {
			t.Fatalf("status %s, want confirmed", status)
		}
	})
}

func TestVerifySignature(t *testing.T) {
	t.Parallel()
	secret, body, now := []byte("s3cr3t-s3cr3t-s3cr3t"), []byte(`{"id":"x"}`), time.Unix(1_800_000_000, 0)
	good := payments.Sign(secret, now, body)
	if err := payments.Verify(secret, good, body, now.Add(4*time.Minute)); err != nil {
		t.Fatalf("good signature refused: %v", err)
	}
	// A rotation sends two v1 values; one matching is enough.
	rot := good + ",v1=" + strings.Repeat("00", 32)
	if err := payments.Verify(secret, rot, body, now); err != nil {
		t.Fatalf("rotation header refused: %v", err)
	}
	for name, h := range map[string]string{"duplicate t": good + ",t=1", "empty": "", "no t": strings.SplitN(good, ",", 2)[1]} {
		if err := payments.Verify(secret, h, body, now); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
