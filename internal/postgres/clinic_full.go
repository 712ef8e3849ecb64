package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/berth"
	"github.com/jackc/pgx/v5"
)

// A full window answered by a read (ADR 0011, "A full window is answered by
// a read, without a transaction").
//
// At a clinic opening most window holds find their window full. Answered in
// the write transaction, each paid a transaction of its own — the fence and
// the key claim, the read, the stored answer, the commit — to write nothing
// but its key. Instead, while a window was found full a moment ago in this
// process (the hint: a heuristic only, never a decision), a window hold
// first asks the database in one round trip, outside any transaction,
// whether the clinic is homed here, whether the window still has a takeable
// slot, which alternatives to offer, and whether its Idempotency-Key has an
// answer. A window still full, of a clinic homed here, with a key that has
// no answer and no hold running in this process, is refused at once with
// the alternatives; like the sold-out cache's refusals (ADR 0008) it commits
// nothing, so nothing is stored with the key and a retry asks again.
// Anything else — an open slot, a key with an answer or in flight, another
// home, an unknown clinic or doctor — goes the ordinary way, which decides.
// The read is the database's state after the request arrived, so the answer
// is as fresh as the transaction's own read would have been: no bound to
// state, nothing to invalidate.
//
// A hold of a named slot found taken a moment ago (the hint: a hold of it
// took it or found it held or booked) is answered the same way
// (refuseTakenSlot, ADR 0011 2026-12-02): its home, its hint and its key
// read first, the alternatives only to refuse.

// fullHintFor is how long a window found full makes the next holds of the
// same window ask the read first.
const fullHintFor = time.Second

// fullHintMax bounds the hints kept; past it the lapsed ones are dropped.
const fullHintMax = 4096

// fullHints remembers the windows recently found full in this process.
type fullHints struct {
	mu   sync.Mutex
	seen map[string]time.Time
	// ttl is how long a hint lasts: fullHintFor unless set
	// (ClinicStore.SetReadHintTTL).
	ttl time.Duration
}

// lasts is how long a hint lasts.
func (h *fullHints) lasts() time.Duration {
	if h.ttl > 0 {
		return h.ttl
	}
	return fullHintFor
}

// fullHintKey is the hint of a hold's window or, for a hold of one slot,
// of its slot ("taken": the hold found it held or booked, or took it).
func fullHintKey(req appointment.HoldRequest) string {
	if !req.ByWindow() {
		return req.ClinicID + "|slot|" + req.SlotID
	}
	return req.ClinicID + "|" + req.DoctorID + "|" + req.WindowStart.UTC().Format(time.RFC3339Nano) + "|" +
		req.WindowEnd.UTC().Format(time.RFC3339Nano)
}

func (h *fullHints) mark(req appointment.HoldRequest, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen == nil {
		h.seen = map[string]time.Time{}
	}
	if len(h.seen) >= fullHintMax {
		for k, at := range h.seen {
			if now.Sub(at) >= h.lasts() {
				delete(h.seen, k)
			}
		}
	}
	if len(h.seen) < fullHintMax {
		h.seen[fullHintKey(req)] = now
	}
}

func (h *fullHints) recent(req appointment.HoldRequest, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.seen[fullHintKey(req)]
	return ok && now.Sub(at) < h.lasts()
}

// slotFlights are the holds of named slots in a transaction in this
// process: at most one per slot at a time (ADR 0011, 2026-12-02 later).
// The holds of a slot that arrive while one is in its transaction wait for
// it to end and then ask the read first (refuseByRead): at an opening the
// herd on a slot arrives while its winner's transaction runs, and each of
// them had gone into a transaction of its own, to queue on the slot's lock
// and store a 409 with its key. A waiting hold decides nothing: after the
// wait it is asked exactly as a hold arriving then would be.
type slotFlights struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// join makes the caller the slot's hold in flight — wait is nil, and leave
// must be called when its transaction has ended — or, when another hold of
// the slot is in flight, returns a channel closed when that one leaves.
func (f *slotFlights) join(slot string) (wait <-chan struct{}, leave func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ch, ok := f.m[slot]; ok {
		return ch, nil
	}
	if f.m == nil {
		f.m = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	f.m[slot] = ch
	return nil, func() {
		f.mu.Lock()
		delete(f.m, slot)
		f.mu.Unlock()
		close(ch)
	}
}

// slotFlightWait bounds how long a hold waits for the hold of its slot in
// flight; past it, it goes to its transaction (which queues on the slot's
// lock, as every hold did before).
const slotFlightWait = 5 * time.Second

// The read of a window hold before its transaction, in one round trip: the
// clinic's home (no FOR SHARE: nothing is written), whether the window has a
// takeable slot (holdInWindow's first read), the alternatives
// (alternativesSQL) and the key's stored answer.
const windowHomeSQL = `SELECT home_region FROM placements WHERE kind = $1 AND partition_id = $2`

const windowOpenSQL = `SELECT ` + windowHasSlotSQL + ` FROM doctors d WHERE d.clinic_id = $1 AND d.doctor_id = $2`

// windowHasSlotSQL is whether the doctor of a row d has a takeable slot
// starting in [$3, $4).
const windowHasSlotSQL = `EXISTS (SELECT 1 FROM slots s WHERE s.clinic_id = d.clinic_id AND s.doctor_id = d.doctor_id
		AND s.starts_at >= $3 AND s.starts_at < $4 AND s.starts_at > now() AND ` + takeableSQL + `)`

const windowKeySQL = `SELECT request_hash, response_status, response_body FROM idempotency_keys
	WHERE partition_id = $1 AND idem_key = $2`

// refuseByRead answers a hold by a read when its window, or its slot, was
// found full (taken) a moment ago and still is (ok); otherwise the hold goes
// on to its transaction.
func (c *ClinicStore) refuseByRead(ctx context.Context, req appointment.HoldRequest, idem *berth.Idem) (berth.Response, bool, error) {
	if idem == nil || idem.Webhook || !c.full.recent(req, time.Now()) || c.s.holdRunning(req.ClinicID, idem.Key) {
		return berth.Response{}, false, nil
	}
	if !req.ByWindow() {
		return c.refuseTakenSlot(ctx, req, idem)
	}
	return c.refuseFullWindow(ctx, req, idem)
}

// refuseFullWindow answers a window hold by a read when the window is still
// full (ok).
func (c *ClinicStore) refuseFullWindow(ctx context.Context, req appointment.HoldRequest, idem *berth.Idem) (berth.Response, bool, error) {
	b := &pgx.Batch{}
	b.Queue(windowHomeSQL, string(berth.KindClinic), req.ClinicID)
	b.Queue(windowOpenSQL, req.ClinicID, req.DoctorID, req.WindowStart, req.WindowEnd)
	b.Queue(alternativesSQL, req.ClinicID, req.DoctorID, "", req.WindowStart, appointment.AlternativeCandidates)
	b.Queue(windowKeySQL, req.ClinicID, idem.Key)
	br := c.s.db.pool.SendBatch(ctx, b)
	var (
		home             string
		open             bool
		alts             []appointment.Slot
		hash             string
		status           *int32
		body             []byte
		keyFound         = true
		homeErr, openErr error
		altsErr, keyErr  error
	)
	homeErr = br.QueryRow().Scan(&home)
	openErr = br.QueryRow().Scan(&open)
	if rows, err := br.Query(); err != nil {
		altsErr = err
	} else {
		alts, altsErr = spreadAlternatives(rows, req.DoctorID, req.GuestID, req.WindowStart)
	}
	keyErr = br.QueryRow().Scan(&hash, &status, &body)
	if errors.Is(keyErr, pgx.ErrNoRows) {
		keyFound, keyErr = false, nil
	}
	closeErr := br.Close()
	if errors.Is(homeErr, pgx.ErrNoRows) || errors.Is(openErr, pgx.ErrNoRows) {
		return berth.Response{}, false, nil // no such clinic or doctor: the transaction says so
	}
	if err := errors.Join(homeErr, openErr, altsErr, keyErr, closeErr); err != nil {
		return berth.Response{}, true, classify(fmt.Errorf("read a window: %w", err))
	}
	if home != c.s.region || open {
		return berth.Response{}, false, nil
	}
	if keyFound {
		return keyAnswer(idem, hash, status, body)
	}
	c.full.mark(req, time.Now())
	resp := berth.Response{}
	resp.Status, resp.Body = idem.Render(nil, slotTakenWith(alts, fullWindowDetail))
	return resp, true, nil
}

// keyAnswer is what a refusal by a read does with a key that has a row: a
// replay of its answer, 422 for another request's key, or (claimed, not
// answered yet) the transaction, which waits for it.
func keyAnswer(idem *berth.Idem, hash string, status *int32, body []byte) (berth.Response, bool, error) {
	if hash != idem.Hash {
		return berth.Response{}, true, berth.Errorf(berth.CodeIdempotencyKeyReused,
			"this Idempotency-Key was used with a different request")
	}
	if status == nil {
		return berth.Response{}, false, nil
	}
	return berth.Response{Status: int(*status), Body: body, Replayed: true}, true, nil
}

// takenSlotDetail is the detail of the refusal of a slot someone holds or
// booked.
const takenSlotDetail = "the slot is held or booked by someone else"

// refuseTakenSlot answers a hold of one slot by a read when the slot is
// still held or booked by someone else (ok), in one round trip: the
// clinic's home, the slot's hint (readSlotHint's read), the key's stored
// answer and the candidates of the alternatives (slotAlternativesSQL) —
// what the transaction's own refusal of a taken slot reads, without its
// fence, its key claim, its stored answer and its commit. The candidates
// are read whether or not the slot is taken: a hold asks this read only
// while its slot was found taken a moment ago, so nearly always it is.
func (c *ClinicStore) refuseTakenSlot(ctx context.Context, req appointment.HoldRequest, idem *berth.Idem) (berth.Response, bool, error) {
	b := &pgx.Batch{}
	b.Queue(windowHomeSQL, string(berth.KindClinic), req.ClinicID)
	b.Queue(slotHintSQL, req.ClinicID, req.SlotID)
	b.Queue(windowKeySQL, req.ClinicID, idem.Key)
	b.Queue(slotAlternativesSQL, req.ClinicID, req.SlotID, appointment.AlternativeCandidates)
	br := c.s.db.pool.SendBatch(ctx, b)
	var (
		home     string
		h        slotHint
		hash     string
		status   *int32
		body     []byte
		keyFound = true
		open     []appointment.Slot
		altsErr  error
	)
	homeErr := br.QueryRow().Scan(&home)
	hintErr := scanSlotHint(br.QueryRow(), &h)
	keyErr := br.QueryRow().Scan(&hash, &status, &body)
	if errors.Is(keyErr, pgx.ErrNoRows) {
		keyFound, keyErr = false, nil
	}
	if rows, err := br.Query(); err != nil {
		altsErr = err
	} else {
		open, altsErr = pgx.CollectRows(rows, scanSlot)
	}
	closeErr := br.Close()
	if errors.Is(homeErr, pgx.ErrNoRows) || errors.Is(hintErr, pgx.ErrNoRows) {
		return berth.Response{}, false, nil // no such clinic or slot: the transaction says so
	}
	if err := errors.Join(homeErr, hintErr, keyErr, altsErr, closeErr); err != nil {
		return berth.Response{}, true, classify(fmt.Errorf("read a slot: %w", err))
	}
	if home != c.s.region || !h.taken {
		return berth.Response{}, false, nil
	}
	if keyFound {
		return keyAnswer(idem, hash, status, body)
	}
	c.full.mark(req, time.Now())
	resp := berth.Response{}
	resp.Status, resp.Body = idem.Render(nil, slotTakenWith(spreadOpen(open, h.doctorID, req.GuestID, h.startsAt), takenSlotDetail))
	return resp, true, nil
}
