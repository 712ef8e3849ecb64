package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/payments"
)

// DevPayer settles an intent of the development provider, as paying on a
// real provider's page would (postgres.DevPaymentProvider implements it).
type DevPayer interface {
	Pay(ctx context.Context, id, clientSecret string, outcome payments.IntentStatus) (in payments.Intent, settled bool, err error)
}

// DevPayments is the development-only way to pay: POST
// /v1/dev/payments/{intent_id}/pay settles the intent with the development
// provider and then sends the signed payment webhook, exactly as a real
// provider would after a guest paid. It is wired only when the development
// provider is configured with BERTH_DEV_PAYMENTS=on, never in production.
type DevPayments struct {
	Payer DevPayer
	// WebhookURL is where the signed event is POSTed (a router, which
	// forwards it to the partition's home region). Empty: this booking
	// service's own handler, in process.
	WebhookURL string
	Client     *http.Client
}

func (s *Server) devPaymentRoutes() {
	s.mux.HandleFunc("POST /v1/dev/payments/{intent_id}/pay", s.handle(s.devPay))
}

type devPayRequest struct {
	ClientSecret string `json:"client_secret"`
	Outcome      string `json:"outcome,omitempty"`
}

func (s *Server) devPay(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("intent_id")
	var req devPayRequest
	if err := Decode(w, r, &req); err != nil {
		return err
	}
	var f Fields
	outcome := payments.IntentStatus(req.Outcome)
	if req.Outcome == "" {
		outcome = payments.IntentSucceeded
	}
	if outcome != payments.IntentSucceeded && outcome != payments.IntentFailed {
		f.Add("outcome", "want succeeded or failed")
	}
	text(&f, "client_secret", req.ClientSecret, 200)
	if err := f.Err(); err != nil {
		return err
	}
	if s.cfg.Payments == nil {
		return berth.Errorf(berth.CodeUnavailable, "the payment webhook is not configured (BERTH_WEBHOOK_SECRET)")
	}
	in, _, err := s.cfg.DevPayments.Payer.Pay(r.Context(), id, req.ClientSecret, outcome)
	if err != nil {
		return err
	}
	typ := "payment.succeeded"
	if in.Status == payments.IntentFailed {
		typ = "payment.failed"
	}
	// One event per intent and outcome: paying twice redelivers the same
	// event, which the webhook deduplicates.
	body, err := json.Marshal(map[string]any{"id": "evt_" + in.ID, "type": typ, "data": map[string]any{
		"kind": in.Kind, "partition_id": in.PartitionID, "reservation_id": in.ReservationID,
		"payment_ref": in.ID, "amount_cents": in.AmountCents, "currency": in.Currency}})
	if err != nil {
		return err
	}
	sig := payments.Sign(s.cfg.Payments.WebhookSecret(), s.cfg.Now(), body)
	status, answer, err := s.deliverWebhook(r.Context(), body, sig)
	out := map[string]any{"intent_id": in.ID, "status": in.Status, "amount_cents": in.AmountCents, "currency": in.Currency}
	if err != nil {
		// Paid, but the event did not arrive: a real provider retries; the
		// guest's /confirm with this intent id works meanwhile.
		s.log.WarnContext(r.Context(), "dev payment webhook not delivered", "intent_id", in.ID, "err", err)
		out["webhook"] = map[string]any{"delivered": false, "error": err.Error()}
	} else {
		out["webhook"] = map[string]any{"delivered": true, "status": status, "answer": json.RawMessage(answer)}
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

// deliverWebhook sends a signed event to the configured URL, or to this
// server's own handler.
func (s *Server) deliverWebhook(ctx context.Context, body []byte, sig string) (int, []byte, error) {
	d := s.cfg.DevPayments
	if d.WebhookURL == "" {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/payments/webhook", bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Berth-Signature", sig)
		rec := &recorder{header: http.Header{}}
		s.ServeHTTP(rec, req)
		return rec.status, rec.body.Bytes(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Berth-Signature", sig)
	client := d.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return resp.StatusCode, nil, err
	}
	if !json.Valid(answer) {
		return resp.StatusCode, nil, fmt.Errorf("webhook answered %d with a body that is not JSON", resp.StatusCode)
	}
	return resp.StatusCode, answer, nil
}

// recorder is the ResponseWriter of an in-process webhook delivery.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}
