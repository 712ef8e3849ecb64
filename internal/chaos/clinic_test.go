package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/google/uuid"
)

// Clinic traffic: patients racing for few slots. Each region has one clinic
// with two doctors — one confirmed on the spot, one prepaid through the
// development payment provider — whose slots over two days are all the
// inventory there is, so most holds lose a race (409 slot_taken) and the
// one-live-appointment-per-slot boundary stays busy while the faults run.

// clinic is a seeded clinic.
type clinic struct {
	ID, Region string
	// Booking is its home region's booking service (the development pay
	// endpoint is served there, not through the router).
	Booking string
	Free    doctor // confirmed in the hold's own call
	Prepaid doctor // held until paid
}

// doctor is one doctor and its slots.
type doctor struct {
	ID    string
	Slots []string
}

// visitPriceCents is what a prepaid appointment costs.
const visitPriceCents = 4500

// seedClinics creates one clinic per region through its booking service,
// with a free and a prepaid doctor whose slots (slotMinutes long, 08:00 to
// 12:00 every day) cover the two days from day.
func (s *stack) seedClinics(t *testing.T, slotMinutes int, day time.Time) []*clinic {
	t.Helper()
	var out []*clinic
	weekly := []map[string]any{}
	for d := 1; d <= 7; d++ {
		weekly = append(weekly, map[string]any{"weekday": d, "start": "08:00", "end": "12:00"})
	}
	for _, r := range s.regions {
		base := s.urls[r]
		c := s.adminCall(t, "POST", base+"/v1/clinics", map[string]any{"name": "Chaos clinic " + r, "timezone": "UTC", "home_region": r})
		cl := &clinic{ID: c["clinic_id"].(string), Region: r, Booking: base}
		for _, doc := range []*doctor{&cl.Free, &cl.Prepaid} {
			body := map[string]any{"name": "Dr. Chaos", "slot_minutes": slotMinutes, "prepay_required": doc == &cl.Prepaid, "weekly": weekly}
			if doc == &cl.Prepaid {
				body["price_cents"], body["currency"] = visitPriceCents, "EUR"
			}
			d := s.adminCall(t, "POST", base+"/v1/clinics/"+cl.ID+"/doctors", body)
			doc.ID = d["doctor_id"].(string)
		}
		s.adminCall(t, "POST", base+"/v1/clinics/"+cl.ID+"/slots/materialize",
			map[string]any{"from": day.Format(time.DateOnly), "to": day.AddDate(0, 0, 2).Format(time.DateOnly)})
		for _, doc := range []*doctor{&cl.Free, &cl.Prepaid} {
			for i := range 2 {
				date := day.AddDate(0, 0, i).Format(time.DateOnly)
				l := s.adminCall(t, "GET", base+"/v1/clinics/"+cl.ID+"/doctors/"+doc.ID+"/slots?date="+date, nil)
				for _, sl := range l["slots"].([]any) {
					doc.Slots = append(doc.Slots, sl.(map[string]any)["slot_id"].(string))
				}
			}
			if len(doc.Slots) == 0 {
				t.Fatalf("clinic %s doctor %s: no slots materialized", cl.ID, doc.ID)
			}
		}
		out = append(out, cl)
	}
	return out
}

// adminCall sends one request with the admin token and fails the test
// unless it answers 2xx.
func (s *stack) adminCall(t *testing.T, method, url string, body any) map[string]any {
	t.Helper()
	var rd *strings.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Authorization", "Bearer "+s.admin)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %v", method, url, resp.StatusCode, m)
	}
	return m
}

// visit is one patient's appointment hold and what followed it.
type visit struct {
	Prepaid bool
	Hold    *op
	Pay     *op // development payment of the hold's intent (prepaid)
	Confirm *op // the guest's own confirm: with the paid intent, or with a made-up ref
	Cancel  *op
	// Unpaid: the confirm named a payment that was never made.
	Unpaid bool
}

// visit runs one patient: a hold on a random slot of a random doctor with
// the patient's own token, through the router; then, for a free doctor,
// sometimes a cancel; for a prepaid one, either paying the intent (the
// webhook confirms) and confirming with it, or confirming with a made-up
// payment (402, nothing changes) and cancelling.
func (l *load) visit(rng *rand.Rand) {
	cl := l.clinics[rng.IntN(len(l.clinics))]
	v := &visit{Prepaid: rng.IntN(2) == 0}
	doc := cl.Free
	if v.Prepaid {
		doc = cl.Prepaid
	}
	guest := "chaos-c-" + uuid.NewString()
	token := l.guestToken(guest)
	via := rng.IntN(len(l.urls))
	send := func(kind, base, path string, body map[string]any) *op {
		b, _ := json.Marshal(body)
		return l.run1(&op{Kind: kind, Clinic: cl, Guest: guest, Via: via, Key: uuid.NewString(), Path: path, Body: b,
			Token: token, Base: base, Started: time.Now()})
	}
	v.Hold = send("appt-hold", "", "/v1/clinics/"+cl.ID+"/appointments",
		map[string]any{"guest_id": guest, "slot_id": doc.Slots[rng.IntN(len(doc.Slots))]})
	l.mu.Lock()
	l.visits = append(l.visits, v)
	l.mu.Unlock()
	if v.Hold.Final != outOK || v.Hold.ResID == "" {
		return
	}
	base := "/v1/clinics/" + cl.ID + "/appointments/" + v.Hold.ResID
	p := rng.IntN(100)
	switch {
	case !v.Prepaid:
		if p < l.cfg.CancelPct*2 { // slots come back, so the race goes on
			v.Cancel = send("appt-cancel", "", base+"/cancel", map[string]any{})
		}
	case v.Hold.IntentID == "":
		// A hold that resolved by a replay after its intent could not be
		// attached carries none; the audit reports it as held.
	case p < l.cfg.ConfirmPct+l.cfg.CancelPct:
		v.Pay = send("appt-pay", cl.Booking, "/v1/dev/payments/"+v.Hold.IntentID+"/pay", map[string]any{"client_secret": v.Hold.ClientSecret})
		if v.Pay.Final == outOK {
			v.Confirm = send("appt-confirm", "", base+"/confirm", map[string]any{"payment_ref": v.Hold.IntentID})
		}
	default:
		v.Unpaid = true
		v.Confirm = send("appt-confirm", "", base+"/confirm", map[string]any{"payment_ref": "free-" + guest})
		v.Cancel = send("appt-cancel", "", base+"/cancel", map[string]any{})
	}
}

// webhookDelivery is the development pay endpoint's account of the webhook
// it sent.
type webhookDelivery struct {
	Delivered bool `json:"delivered"`
	Status    int  `json:"status"`
	Answer    struct {
		Outcome string `json:"outcome"`
		Status  string `json:"status"`
	} `json:"answer"`
}

// outcome of a payment by what its webhook did: applied is ok; another
// handled outcome (the hold lapsed …) a definite no; undelivered or a 5xx
// unknown — paying again redelivers the same event.
func (d *webhookDelivery) outcome() (outcome, string) {
	switch {
	case d == nil:
		return outUnknown, "no webhook report"
	case !d.Delivered || d.Status >= 500:
		return outUnknown, fmt.Sprintf("webhook %d", d.Status)
	case d.Status == http.StatusOK && d.Answer.Outcome == "applied":
		return outOK, "applied"
	case d.Status == http.StatusOK:
		return outFailed, "webhook " + d.Answer.Outcome
	}
	return outFailed, fmt.Sprintf("webhook %d", d.Status)
}

// visitAudit compares every clinic outcome with the database.
type visitAudit struct {
	bookingAudit
	// PaidNotConfirmed: a payment the webhook applied, yet the appointment
	// is not confirmed (money taken for nothing).
	PaidNotConfirmed int `json:"paid_not_confirmed"`
	// UnpaidConfirmed: confirmed by a made-up payment.
	UnpaidConfirmed int `json:"unpaid_confirmed"`
	// Refused402: confirms with a made-up payment answered 402.
	Refused402 int `json:"refused_402"`
}

func auditVisits(ctx context.Context, db *postgres.DB, visits []*visit) (visitAudit, error) {
	var a visitAudit
	byGuest, err := rowsByGuest(ctx, db, `SELECT guest_id, appointment_id::TEXT, status FROM appointments WHERE guest_id LIKE 'chaos-c-%'`)
	if err != nil {
		return a, fmt.Errorf("read appointments: %w", err)
	}
	example := func(format string, args ...any) {
		if len(a.Examples) < 10 {
			a.Examples = append(a.Examples, fmt.Sprintf(format, args...))
		}
	}
	for _, v := range visits {
		a.Holds++
		h := v.Hold
		got := byGuest[h.Guest]
		if len(got) > 1 {
			a.Duplicated++
			example("appointment hold %s (%s): %d appointments", h.Key, h.Final, len(got))
			continue
		}
		switch h.Final {
		case outOK:
			switch {
			case len(got) == 0:
				a.Lost++
				example("appointment hold %s answered %d %s but no appointment exists", h.Key, h.Status, h.ResID)
				continue
			case got[0].id != h.ResID:
				a.Mismatched++
				example("appointment hold %s answered %s but the appointment is %s", h.Key, h.ResID, got[0].id)
				continue
			}
			a.OKExactlyOnce++
			st := got[0].status
			if want := visitStates(v); !want[st] {
				a.WrongState++
				example("appointment %s is %s; outcomes allow %v", h.ResID, st, keys(want))
			}
			if v.Pay != nil && v.Pay.Final == outOK && st != "confirmed" {
				a.PaidNotConfirmed++
				example("appointment %s was paid (webhook applied) but is %s", h.ResID, st)
			}
		case outRejected, outFailed:
			if len(got) == 0 {
				a.RefusedAbsent++
			} else {
				a.Phantom++
				example("appointment hold %s was refused (%d %s) but appointment %s exists", h.Key, h.Status, h.Code, got[0].id)
			}
		case outUnknown:
			if len(got) == 0 {
				a.UnresolvedAbsent++
			} else {
				a.UnresolvedExist++
			}
		}
		if v.Unpaid && v.Confirm != nil {
			if v.Confirm.Final == outOK {
				a.UnpaidConfirmed++
				example("appointment %s confirmed with the made-up payment of %s", h.ResID, v.Confirm.Key)
			} else if v.Confirm.Final == outFailed && v.Confirm.Status == http.StatusPaymentRequired {
				a.Refused402++
			}
		}
	}
	return a, nil
}

// visitStates is what an appointment may be in given what its patient
// learned (as allowedStates for hotels).
func visitStates(v *visit) map[string]bool {
	states := map[string]bool{"held": true}
	if !v.Prepaid {
		states = map[string]bool{"confirmed": true}
	}
	apply := func(o *op, to string) {
		if o == nil {
			return
		}
		switch o.Final {
		case outOK:
			states = map[string]bool{to: true}
		case outUnknown:
			states[to] = true
		}
	}
	apply(v.Pay, "confirmed")
	apply(v.Confirm, "confirmed")
	apply(v.Cancel, "cancelled")
	return states
}

func (l *load) snapshotVisits() []*visit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*visit(nil), l.visits...)
}

// mint returns guest's own bearer token — a patient confirms a prepaid
// appointment with its payment, not as staff ("" if it cannot be minted:
// the request then meets a 401, which the audit shows).
func (s *stack) mint(guest string) string {
	tok, _ := s.tokens.Mint(berth.Principal{Subject: guest, Role: berth.RoleGuest}, 6*time.Hour)
	return tok
}
