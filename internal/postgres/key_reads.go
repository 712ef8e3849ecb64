package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/berth"
)

// Coalesced key reads for the sold-out cache's refusals (ADR 0008, "Losers
// read their keys together").
//
// A hold the sold-out cache refuses still asks the database one question:
// does its Idempotency-Key have a stored answer (then that answer is
// replayed — a client retrying a hold that won gets its 201)? In a flash sale
// that question is asked by every loser, and each asking alone costs a pool
// checkout, a round trip and a backend's parse and plan: most of what a
// cached refusal costs the database and a good part of what it costs the
// booking service. So the reads of one hotel are coalesced like the holds of
// a hot room type (hold_batch.go): at most one read of a hotel runs at a
// time; the first runs at once, with the keys asked together with it (the
// holds queued behind a win, refused at once: refuseQueued); keys asked
// while it runs wait and are read together, in one statement, as soon as it
// ends, after lingering keyReadLinger for more while they keep coming. A
// read therefore always starts after its request arrived (it sees every
// commit that returned before), and only a read that follows another waits,
// for at most keyReadLinger.

// keyReadBatch bounds the keys of one coalesced read.
const keyReadBatch = 256

// keyReadLinger is how long a read that follows another of the same hotel
// waits for more keys before it runs. Under a flash sale's stream of losers
// (2,000/s) a read without it found one or two keys waiting (999 keys in
// 681–791 statements); with it, three to five, and a fifth less CPU per
// loser over every process (ADR 0008, "2026-12-07"). A lone refusal, or the
// first of a burst, is read at once.
const keyReadLinger = time.Millisecond

// keyReadTimeout bounds one coalesced read: its callers may have gone, so
// it runs on a context of its own.
const keyReadTimeout = 10 * time.Second

// storedAnswersSQL reads the stored answers of many keys of one partition.
const storedAnswersSQL = `SELECT idem_key, request_hash, response_status, response_body FROM idempotency_keys
	WHERE partition_id = $1 AND idem_key = ANY($2::TEXT[])`

// storedAnswer is what a key read found: nothing (found false), or the key's
// request hash and answer (status nil: claimed, not answered yet).
type storedAnswer struct {
	found  bool
	hash   string
	status *int32
	body   []byte
}

type keyCall struct {
	key  string
	done chan struct{}
	ans  storedAnswer
	err  error
}

// keyQueue is one hotel's key reads: running while a read is in flight,
// waiting the calls for the next one.
type keyQueue struct {
	running bool
	waiting []*keyCall
}

// refusalReplay answers a hold the sold-out cache refuses: the stored answer
// of its key when there is one (replayed), else refusal rendered as the
// key's answer (not stored: a cached refusal commits nothing).
func (s *Store) refusalReplay(ctx context.Context, hotelID string, idem *berth.Idem, refusal error) (berth.Response, error) {
	ans, err := s.readKey(ctx, hotelID, idem.Key)
	return refusalAnswer(idem, refusal, ans, err)
}

// refusalAnswer is refusalReplay's answer from what the key read found.
func refusalAnswer(idem *berth.Idem, refusal error, ans storedAnswer, err error) (berth.Response, error) {
	if err != nil {
		return berth.Response{}, classify(err)
	}
	if !ans.found {
		resp := berth.Response{}
		resp.Status, resp.Body = idem.Render(nil, refusal)
		return resp, nil
	}
	if ans.hash != idem.Hash {
		return berth.Response{}, berth.Errorf(berth.CodeIdempotencyKeyReused,
			"this Idempotency-Key was used with a different request")
	}
	if ans.status == nil {
		// Claimed by a transaction that committed without its answer cannot
		// happen (the answer is written in the same transaction); a claim
		// is visible here only once committed, so treat it as running.
		return berth.Response{}, berth.Errorf(berth.CodeIdempotencyInProgress, "a request with this Idempotency-Key is still running")
	}
	return berth.Response{Status: int(*ans.status), Body: ans.body, Replayed: true}, nil
}

// readKey reads what the database holds for key of hotelID, together with
// the other keys of the hotel asked meanwhile.
func (s *Store) readKey(ctx context.Context, hotelID, key string) (storedAnswer, error) {
	c := newKeyCall(key)
	s.submitKeys(ctx, hotelID, []*keyCall{c})
	return c.wait(ctx)
}

func newKeyCall(key string) *keyCall { return &keyCall{key: key, done: make(chan struct{})} }

// wait returns the call's answer once its read ended, or ctx's error first:
// the read goes on for the others, and this caller's answer is dropped.
func (c *keyCall) wait(ctx context.Context) (storedAnswer, error) {
	select {
	case <-c.done:
		return c.ans, c.err
	case <-ctx.Done():
		return storedAnswer{}, ctx.Err()
	}
}

// submitKeys asks calls' keys of hotelID together: they wait for the next
// read when one is in flight, else a read of them starts now (at most
// keyReadBatch keys; the rest wait for the next). Holds refused together —
// the queue behind a win (refuseQueued) — so ask once, not one first and
// the others after it. ctx carries the trace of the read started here.
func (s *Store) submitKeys(ctx context.Context, hotelID string, calls []*keyCall) {
	if len(calls) == 0 {
		return
	}
	s.mu.Lock()
	q := s.keyQueues[hotelID]
	if q == nil {
		q = &keyQueue{}
		s.keyQueues[hotelID] = q
	}
	if q.running {
		q.waiting = append(q.waiting, calls...)
		s.mu.Unlock()
		return
	}
	q.running = true
	n := min(len(calls), keyReadBatch)
	q.waiting = append(q.waiting, calls[n:]...)
	s.mu.Unlock()
	go s.readKeys(context.WithoutCancel(ctx), hotelID, calls[:n:n])
}

// readKeys reads calls' keys in one statement, answers each, then runs the
// next read with the calls that queued meanwhile, until none did. A next
// read means keys keep coming (they queued while a read ran): it lingers
// keyReadLinger first, for the keys asked during it to join it. The first
// read of a quiet hotel never waits.
func (s *Store) readKeys(ctx context.Context, hotelID string, calls []*keyCall) {
	for next := false; len(calls) > 0; next = true {
		if next && len(calls) < keyReadBatch {
			s.lingerForKeys()
			s.mu.Lock()
			calls = append(calls, s.keyQueues[hotelID].take(keyReadBatch-len(calls))...)
			s.mu.Unlock()
		}
		s.readKeysOnce(ctx, hotelID, calls)
		s.mu.Lock()
		calls = s.keyQueues[hotelID].take(keyReadBatch)
		if len(calls) == 0 {
			delete(s.keyQueues, hotelID)
		}
		s.mu.Unlock()
	}
}

// take removes and returns up to n of the calls waiting, first come first
// (s.mu held).
func (q *keyQueue) take(n int) []*keyCall {
	n = min(n, len(q.waiting))
	calls := q.waiting[:n:n]
	q.waiting = q.waiting[n:]
	return calls
}

// lingerForKeys is the pause before a next read (keyReadLinger; a test sets
// its own through keyReadPause).
func (s *Store) lingerForKeys() {
	if s.keyReadPause != nil {
		s.keyReadPause()
		return
	}
	time.Sleep(keyReadLinger)
}

func (s *Store) readKeysOnce(ctx context.Context, hotelID string, calls []*keyCall) {
	ctx, cancel := context.WithTimeout(ctx, keyReadTimeout)
	defer cancel()
	keys := make([]string, 0, len(calls))
	seen := make(map[string]bool, len(calls))
	for _, c := range calls {
		if !seen[c.key] {
			seen[c.key] = true
			keys = append(keys, c.key)
		}
	}
	s.batch.keyReads.Add(1)
	s.batch.keysRead.Add(int64(len(keys)))
	found := make(map[string]storedAnswer, len(keys))
	err := func() error {
		rows, err := s.db.pool.Query(ctx, storedAnswersSQL, hotelID, keys)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				key string
				a   = storedAnswer{found: true}
			)
			if err := rows.Scan(&key, &a.hash, &a.status, &a.body); err != nil {
				return err
			}
			found[key] = a
		}
		return rows.Err()
	}()
	if err != nil {
		err = fmt.Errorf("read idempotency keys: %w", err)
	}
	for _, c := range calls {
		c.ans, c.err = found[c.key], err
		close(c.done)
	}
}
