package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// outcome is what a client learned from one request.
type outcome int

const (
	outOK       outcome = iota // 2xx
	outRejected                // an expected 409: sold_out, invalid_state, hold_expired — nothing changed
	outFailed                  // another definite 4xx — nothing changed
	outUnknown                 // timeout, connection error, 5xx, idempotency_in_progress: it may have happened
)

func (o outcome) String() string {
	return [...]string{"ok", "rejected", "failed", "unknown"}[o]
}

// classify maps an answer to an outcome. attempt counts from 1: a 429 on a
// first attempt says the request never ran; on a retry it says nothing
// about the attempt that went before it.
func classify(status int, code string, err error, attempt int) outcome {
	switch {
	case err != nil || status >= 500:
		return outUnknown
	case status >= 200 && status < 300:
		return outOK
	case status == http.StatusConflict && code == "idempotency_in_progress":
		return outUnknown
	case status == http.StatusConflict:
		return outRejected
	case status == http.StatusTooManyRequests && attempt > 1:
		return outUnknown
	default:
		return outFailed
	}
}

// op is one logical client request and everything that happened to it.
type op struct {
	Kind   string // hold, confirm, cancel; appt-hold, appt-pay, appt-confirm, appt-cancel; walk-hold, walk-confirm, check-in, upgrade, relocate
	Hotel  hotel
	Clinic *clinic // set for the appt-* kinds
	Guest  string  // unique per chain: finds the booking in the database
	Key    string
	Path   string
	// Token is the bearer token of the request ("" = the load's admin
	// token); Base, when set, is where it goes instead of a router (the
	// development pay endpoint lives on the booking service).
	Token string
	Base  string
	// Via indexes load.urls: the router this op's next attempt goes to —
	// the client's own region's first, the next one after a transport
	// error (a client fails over when its region's router does not answer).
	Via      int
	Body     []byte
	Started  time.Time
	Ended    time.Time
	Attempts int
	First    outcome // of the first attempt
	Final    outcome // after retries (outUnknown = unresolved)
	Status   int
	Code     string
	Replayed bool   // the resolving answer was an idempotent replay
	FirstAns string // what the first attempt got, e.g. "502" or "timeout"
	ResID    string
	ResState string
	// Of a prepaid appointment hold: the payment intent to pay.
	IntentID, ClientSecret string
	// Of a development payment: what the webhook it sent answered.
	Webhook string
	// Of a relocation: the walk id (the sister's stay to be).
	WalkID string
}

// chain is one guest's hold and what followed it.
type chain struct {
	Hold    *op
	Confirm *op
	Cancel  *op
}

// loadConfig shapes the traffic.
type loadConfig struct {
	Workers     int
	Rate        float64       // chains started per second (holds/s)
	Timeout     time.Duration // per attempt
	RetryFor    time.Duration // how long a worker retries an unknown outcome before parking it
	Window      int           // nights of the sale window the stays fall into
	HotPct      int           // share of holds aimed at the hot hotels
	ClinicPct   int           // share of chains that are clinic visits (when clinics are seeded)
	WalkPct     int           // share of chains that are guests arriving at an overbooked hotel (when walk hotels are seeded)
	ConfirmPct  int
	CancelPct   int
	MaxAttempts int
}

// load drives hotel traffic through the routers and records every outcome.
type load struct {
	cfg    loadConfig
	urls   []string // routers; each chain's client is near one of them
	token  string
	hotels []hotel
	from   time.Time
	client *http.Client
	// clinics, when set, receive ClinicPct of the chains; guestToken
	// mints each visit's own guest token.
	clinics    []*clinic
	guestToken func(guest string) string
	// walkPairs, when set, receive WalkPct of the chains: guests arriving
	// on walkDay (walks_test.go).
	walkPairs []*walkPair
	walkDay   time.Time
	// onAttempt, when set, sees every attempt's answer (set before run).
	onAttempt func(o *op, a attemptInfo)

	mu        sync.Mutex
	started   time.Time
	chains    []*chain
	visits    []*visit
	walks     []*walkChain
	successes []success // every successful hold, in the order they answered
	parked    []*op     // unknown after RetryFor: resolved at the end
}

func newLoad(cfg loadConfig, urls []string, token string, hotels []hotel, from time.Time) *load {
	tr := &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: 30 * time.Second}
	return &load{cfg: cfg, urls: urls, token: token, hotels: hotels, from: from,
		client: &http.Client{Transport: tr, Timeout: cfg.Timeout}}
}

// run drives load until ctx ends; it returns when every worker finished
// its current chain (retries bounded by RetryFor).
func (l *load) run(ctx context.Context) {
	l.mu.Lock()
	l.started = time.Now()
	l.mu.Unlock()
	tokens := make(chan struct{}, l.cfg.Workers)
	go func() {
		tick := time.NewTicker(time.Duration(float64(time.Second) / l.cfg.Rate))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				close(tokens)
				return
			case <-tick.C:
				select {
				case tokens <- struct{}{}:
				default: // every worker busy: the load sheds instead of queueing
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < l.cfg.Workers; w++ {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			for range tokens {
				l.chain(rng)
			}
		})
	}
	wg.Wait()
}

func (l *load) chain(rng *rand.Rand) {
	switch p := rng.IntN(100); {
	case len(l.clinics) > 0 && p < l.cfg.ClinicPct:
		l.visit(rng)
		return
	case len(l.walkPairs) > 0 && p >= 100-l.cfg.WalkPct:
		l.walk(rng)
		return
	}
	h := l.pick(rng)
	guest := "chaos-" + uuid.NewString()
	in := l.from.AddDate(0, 0, rng.IntN(l.cfg.Window-3))
	nights := 1 + rng.IntN(3)
	c := &chain{}
	via := rng.IntN(len(l.urls))
	c.Hold = l.do(h, guest, via, "hold", "/v1/hotels/"+h.ID+"/reservations", map[string]any{
		"guest_id": guest, "room_type_id": h.RoomTypeID, "check_in": in.Format("2006-01-02"),
		"check_out": in.AddDate(0, 0, nights).Format("2006-01-02"), "quantity": 1 + rng.IntN(2)})
	l.mu.Lock()
	l.chains = append(l.chains, c)
	l.mu.Unlock()
	if c.Hold.Final != outOK || c.Hold.ResID == "" {
		return
	}
	base := "/v1/hotels/" + h.ID + "/reservations/" + c.Hold.ResID
	p := rng.IntN(100)
	if p < l.cfg.ConfirmPct {
		c.Confirm = l.do(h, guest, c.Hold.Via, "confirm", base+"/confirm", map[string]any{"payment_ref": "pay-" + guest})
		if c.Confirm.Final == outOK && rng.IntN(100) < l.cfg.CancelPct {
			c.Cancel = l.do(h, guest, c.Hold.Via, "cancel", base+"/cancel", map[string]any{})
		}
	} else if p < l.cfg.ConfirmPct+l.cfg.CancelPct {
		c.Cancel = l.do(h, guest, c.Hold.Via, "cancel", base+"/cancel", map[string]any{})
	}
}

// pick chooses a hotel: a hot one HotPct of the time.
func (l *load) pick(rng *rand.Rand) hotel {
	var hot, cold []hotel
	for _, h := range l.hotels {
		if h.Hot {
			hot = append(hot, h)
		} else {
			cold = append(cold, h)
		}
	}
	if len(hot) > 0 && (len(cold) == 0 || rng.IntN(100) < l.cfg.HotPct) {
		return hot[rng.IntN(len(hot))]
	}
	return cold[rng.IntN(len(cold))]
}

// do sends one logical request, retrying an unknown outcome with the same
// key and body for up to RetryFor; still unknown then, the op is parked.
func (l *load) do(h hotel, guest string, via int, kind, path string, body map[string]any) *op {
	b, _ := json.Marshal(body)
	return l.run1(&op{Kind: kind, Hotel: h, Guest: guest, Via: via, Key: uuid.NewString(), Path: path, Body: b, Started: time.Now()})
}

// run1 sends o until it resolves (see do).
func (l *load) run1(o *op) *op {
	deadline := o.Started.Add(l.cfg.RetryFor)
	backoff := 100 * time.Millisecond
	for {
		l.attempt(o)
		if o.Final != outUnknown || time.Now().After(deadline) || o.Attempts >= l.cfg.MaxAttempts {
			break
		}
		time.Sleep(backoff + time.Duration(rand.Int64N(int64(backoff))))
		backoff = min(backoff*2, 2*time.Second)
	}
	o.Ended = time.Now()
	if o.Final == outUnknown {
		l.mu.Lock()
		l.parked = append(l.parked, o)
		l.mu.Unlock()
	}
	return o
}

// attempt sends the op once and folds the answer into it.
func (l *load) attempt(o *op) {
	o.Attempts++
	via := o.Via
	base, token := l.urls[via], l.token
	if o.Base != "" {
		base = o.Base
	}
	if o.Token != "" {
		token = o.Token
	}
	req, err := http.NewRequest(http.MethodPost, base+o.Path, bytes.NewReader(o.Body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", o.Key)
	status, code := 0, ""
	var ans struct {
		Code          string `json:"code"`
		ReservationID string `json:"reservation_id"`
		AppointmentID string `json:"appointment_id"`
		Status        string `json:"status"`
		Payment       struct {
			IntentID     string `json:"intent_id"`
			ClientSecret string `json:"client_secret"`
		} `json:"payment"`
		Webhook *webhookDelivery `json:"webhook"`
		Walk    struct {
			ReservationID string `json:"reservation_id"`
		} `json:"walk"`
	}
	var retryAfter, servedBy string
	resp, err := l.client.Do(req)
	if err == nil {
		retryAfter, servedBy = resp.Header.Get("Retry-After"), resp.Header.Get("X-Berth-Served-By")
		data, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		status, err = resp.StatusCode, rerr
		_ = json.Unmarshal(data, &ans)
		code = ans.Code
		o.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	}
	out := classify(status, code, err, o.Attempts)
	if o.Kind == "appt-pay" && out == outOK {
		// The payment went through; what it did to the appointment is
		// what the webhook it sent answered (a 5xx there is retried by
		// paying again: the same event, deduplicated).
		out, code = ans.Webhook.outcome()
		o.Webhook = code
	}
	if o.Attempts == 1 {
		o.First = out
		o.FirstAns = answerKind(status, code, err)
	}
	o.Final, o.Status, o.Code = out, status, code
	if err != nil {
		o.Code = "transport: " + shortErr(err)
		o.Via = (o.Via + 1) % len(l.urls)
	}
	if l.onAttempt != nil {
		l.onAttempt(o, attemptInfo{At: time.Now(), Via: via, Answer: answerKind(status, code, err), Status: status,
			RetryAfter: retryAfter, ServedBy: servedBy, Outcome: out})
	}
	if out == outOK {
		o.ResID, o.ResState = ans.ReservationID, ans.Status
		if ans.AppointmentID != "" {
			o.ResID = ans.AppointmentID
		}
		o.IntentID, o.ClientSecret = ans.Payment.IntentID, ans.Payment.ClientSecret
		o.WalkID = ans.Walk.ReservationID
		if o.Kind == "hold" {
			l.mu.Lock() // the time is read under the lock so successes stay sorted
			l.successes = append(l.successes, success{At: time.Now(), ResID: ans.ReservationID, HotelID: o.Hotel.ID})
			l.mu.Unlock()
		}
	}
}

// attemptInfo is one attempt's answer, for scenarios that study them.
type attemptInfo struct {
	At         time.Time
	Via        int    // index of the router it went to
	Answer     string // answerKind
	Status     int
	RetryAfter string
	ServedBy   string
	Outcome    outcome
}

// success is one successful hold.
type success struct {
	At             time.Time
	ResID, HotelID string
}

// firstSuccessAfter returns the first hold that succeeded after t.
func (l *load) firstSuccessAfter(t time.Time) (success, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := sort.Search(len(l.successes), func(i int) bool { return l.successes[i].At.After(t) })
	if i < len(l.successes) {
		return l.successes[i], true
	}
	return success{}, false
}

// resolveParked retries every parked op until it resolves or the budget
// runs out (faults are healed by now).
func (l *load) resolveParked(budget time.Duration) {
	l.mu.Lock()
	parked := l.parked
	l.mu.Unlock()
	deadline := time.Now().Add(budget)
	for _, o := range parked {
		for o.Final == outUnknown && time.Now().Before(deadline) && o.Attempts < l.cfg.MaxAttempts+50 {
			l.attempt(o)
			if o.Final == outUnknown {
				time.Sleep(500 * time.Millisecond)
			}
		}
	}
}

// ops returns every op recorded so far.
func (l *load) ops() []*op {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*op
	for _, c := range l.chains {
		for _, o := range []*op{c.Hold, c.Confirm, c.Cancel} {
			if o != nil {
				out = append(out, o)
			}
		}
	}
	for _, v := range l.visits {
		for _, o := range []*op{v.Hold, v.Pay, v.Confirm, v.Cancel} {
			if o != nil {
				out = append(out, o)
			}
		}
	}
	for _, w := range l.walks {
		for _, o := range []*op{w.Hold, w.Confirm, w.CheckIn, w.Upgrade, w.Relocate} {
			if o != nil {
				out = append(out, o)
			}
		}
	}
	return out
}

// answerKind names an answer coarsely for the report.
func answerKind(status int, code string, err error) string {
	if err != nil {
		msg := err.Error()
		for _, k := range []string{"timeout", "refused", "reset", "EOF", "broken pipe"} {
			if strings.Contains(msg, k) || (k == "timeout" && strings.Contains(msg, "deadline exceeded")) {
				return "transport " + k
			}
		}
		return "transport error"
	}
	return strings.TrimSpace(fmt.Sprintf("%d %s", status, code))
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 80 {
		s = s[len(s)-80:]
	}
	return fmt.Sprint(s)
}
