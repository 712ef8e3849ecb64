package waitingroom

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/redis/go-redis/v9"
)

// issue gives an identity its ticket for one window, atomically:
//
//	KEYS[1] queue (sorted set ticket id → score), KEYS[2] identities (hash
//	identity → "ticketid|iat"), KEYS[3] arrival counter after the opening,
//	KEYS[4] base (positions handed out before the queue was last created)
//	ARGV identity, "ticketid|iat", pre-opening (1/0), random score, ttl ms,
//	positions admitted by now
//
// An identity that already holds a ticket gets it back with its current
// rank; nothing about it changes. A queue created after the opening — the
// first arrival came late, or Redis lost the queue (a restart without
// persistence, a flush, a failover) — numbers its places after every
// position admitted so far: those may have been handed out already, and
// admission stays at the window's rate however often the queue is lost.
// It returns {created, "ticketid|iat", rank, base}; the position is
// base + rank + 1.
var issue = redis.NewScript(`
local cur = redis.call('HGET', KEYS[2], ARGV[1])
local created = 0
if not cur then
  cur = ARGV[2]
  local score = ARGV[4]
  if ARGV[3] == '0' then
    if redis.call('EXISTS', KEYS[1]) == 0 then
      redis.call('SET', KEYS[4], ARGV[6], 'PX', ARGV[5])
    end
    score = redis.call('INCR', KEYS[3])
  end
  redis.call('ZADD', KEYS[1], score, string.match(cur, '^[^|]+'))
  redis.call('HSET', KEYS[2], ARGV[1], cur)
  for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ARGV[5]) end
  created = 1
end
local rank = redis.call('ZRANK', KEYS[1], string.match(cur, '^[^|]+'))
if not rank then rank = -1 end
return {created, cur, rank, tonumber(redis.call('GET', KEYS[4]) or '0')}
`)

// place reads a ticket's rank and the queue's base in one step (KEYS[1]
// queue, KEYS[4] base; ARGV ticket id): {rank, base}, or nil when the
// ticket is not in the queue.
var place = redis.NewScript(`
local rank = redis.call('ZRANK', KEYS[1], ARGV[1])
if not rank then return false end
return {rank, tonumber(redis.call('GET', KEYS[4]) or '0')}
`)

// Options configure a Room. Zero values take the defaults.
type Options struct {
	// Prefix starts every key (default "berth:wr").
	Prefix string
	// AccessTTL is the lifetime of an access token (default 10 min).
	AccessTTL time.Duration
	// Timeout bounds one Redis call (default 500 ms).
	Timeout time.Duration
	Now     func() time.Time
	// Rand draws the random scores of pre-opening arrivals (default
	// crypto/rand); tests pass a seeded source.
	Rand   func() uint64
	Logger *slog.Logger
}

// Room is the waiting room of every configured clinic, its queue in Redis.
type Room struct {
	gate *Gate
	rdb  redis.UniversalClient
	opts Options
}

// NewRoom returns a room over windows, keys and rdb.
func NewRoom(windows map[string]Window, keys *Keyring, rdb redis.UniversalClient, opts Options) *Room {
	if opts.Prefix == "" {
		opts.Prefix = "berth:wr"
	}
	if opts.AccessTTL <= 0 {
		opts.AccessTTL = 10 * time.Minute
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 500 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Rand == nil {
		opts.Rand = cryptoUint64
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Room{gate: NewGate(windows, keys, opts.Now), rdb: rdb, opts: opts}
}

// Gate returns the room's gate (the same windows, keys and clock).
func (rm *Room) Gate() *Gate { return rm.gate }

func cryptoUint64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return binary.LittleEndian.Uint64(b[:])
}

// Ticket is what a patient gets on joining.
type Ticket struct {
	Token    string `json:"ticket"`
	Position int64  `json:"position"`
	// EstimatedWaitSeconds is until the ticket is admitted at the
	// configured rate (0 once admitted).
	EstimatedWaitSeconds int64 `json:"estimated_wait_seconds"`
	// OpensAt is the opening, RFC 3339 UTC.
	OpensAt string `json:"opens_at"`
	// Created is false when the identity already held this ticket.
	Created bool `json:"-"`
}

// Status is a ticket's place in the queue.
type Status struct {
	Position             int64  `json:"position"`
	Admitted             bool   `json:"admitted"`
	AccessToken          string `json:"access_token,omitempty"`
	AccessExpiresAt      string `json:"access_expires_at,omitempty"`
	EstimatedWaitSeconds int64  `json:"estimated_wait_seconds"`
	// NowServing is how many positions are admitted so far.
	NowServing int64 `json:"now_serving"`
}

// keys returns the Redis keys of one window occurrence; the hash tag keeps
// them in one cluster slot, so the script is valid on Redis Cluster.
func (rm *Room) keys(in Instance) []string {
	tag := rm.opts.Prefix + ":{" + in.ClinicID + ":" + in.Date + "}"
	return []string{tag + ":queue", tag + ":ids", tag + ":seq", tag + ":base"}
}

// Issue gives identity its ticket for the clinic's active window: a new one
// the first time, the same one (with its current position) after that.
// subject, the verified guest behind identity ("" when none), is bound into
// the ticket and the access token it earns.
func (rm *Room) Issue(ctx context.Context, clinicID, identity, subject string) (Ticket, error) {
	clinicID = strings.ToLower(clinicID)
	now := rm.opts.Now()
	in, err := rm.active(clinicID, now)
	if err != nil {
		return Ticket{}, err
	}
	// Identities are stored hashed: bounded size, and no IP addresses at rest.
	sum := sha256.Sum256([]byte(identity))
	ident := hex.EncodeToString(sum[:16])
	var tid [16]byte
	_, _ = rand.Read(tid[:])
	pre := now.Before(in.Opens)
	// Pre-opening scores are uniform integers in [-2^52, 0): exact as a
	// float64 score, and always ahead of the counter's 1, 2, 3 … that
	// orders later arrivals.
	score := int64(rm.opts.Rand()>>12) - 1<<52
	ttl := in.End.Sub(now) + time.Hour
	ctx, cancel := context.WithTimeout(ctx, rm.opts.Timeout)
	defer cancel()
	res, err := issue.Run(ctx, rm.rdb, rm.keys(in), ident, hex.EncodeToString(tid[:])+"|"+strconv.FormatInt(now.UnixMilli(), 10),
		boolArg(pre), strconv.FormatInt(score, 10), ttl.Milliseconds(), in.Admitted(now)).Slice()
	if err == nil && len(res) != 4 {
		err = fmt.Errorf("unexpected script reply %v", res)
	}
	if err != nil {
		return Ticket{}, rm.unavailable(ctx, "issue ticket", err)
	}
	created, _ := res[0].(int64)
	cur, _ := res[1].(string)
	rank, _ := res[2].(int64)
	base, _ := res[3].(int64)
	id, iatStr, _ := strings.Cut(cur, "|")
	iat, perr := strconv.ParseInt(iatStr, 10, 64)
	if id == "" || perr != nil || rank < 0 || base < 0 {
		return Ticket{}, rm.unavailable(ctx, "issue ticket", fmt.Errorf("inconsistent queue entry %q rank %d base %d", cur, rank, base))
	}
	pos := base + rank + 1
	tok := rm.gate.keys.sign(claims{Typ: typTicket, ClinicID: clinicID, TicketID: id, Window: in.Date, Subject: subject,
		IssuedAt: iat, Expires: in.End.UnixMilli()})
	return Ticket{Token: tok, Position: pos, EstimatedWaitSeconds: waitSeconds(in, pos, now),
		OpensAt: in.Opens.UTC().Format(time.RFC3339), Created: created == 1}, nil
}

// Status returns a ticket's position and, once admitted, an access token.
// It only reads: polling never changes a position.
func (rm *Room) Status(ctx context.Context, clinicID, ticket string) (Status, error) {
	clinicID = strings.ToLower(clinicID)
	now := rm.opts.Now()
	c, err := rm.gate.keys.verify(ticket, typTicket, clinicID, now)
	if err != nil {
		return Status{}, ticketError(err)
	}
	w, ok := rm.gate.windows[clinicID]
	var in Instance
	if ok {
		in, ok = w.OnDate(c.Window)
	}
	if !ok {
		return Status{}, berth.Errorf(berth.CodeNotFound, "this clinic has no waiting room for that ticket's day")
	}
	ctx, cancel := context.WithTimeout(ctx, rm.opts.Timeout)
	defer cancel()
	res, err := place.Run(ctx, rm.rdb, rm.keys(in), c.TicketID).Int64Slice()
	if errors.Is(err, redis.Nil) {
		return Status{}, berth.Errorf(berth.CodeNotFound, "the ticket is not in the queue (the queue was lost); join again")
	}
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("unexpected script reply %v", res)
	}
	if err != nil {
		return Status{}, rm.unavailable(ctx, "ticket status", err)
	}
	st := Status{Position: res[1] + res[0] + 1, NowServing: in.Admitted(now)}
	st.Admitted = st.Position <= st.NowServing
	st.EstimatedWaitSeconds = waitSeconds(in, st.Position, now)
	if st.Admitted {
		exp := now.Add(rm.opts.AccessTTL)
		st.AccessToken = rm.gate.keys.sign(claims{Typ: typAccess, ClinicID: clinicID, TicketID: c.TicketID, Window: in.Date,
			Subject: c.Subject, IssuedAt: now.UnixMilli(), Expires: exp.UnixMilli()})
		st.AccessExpiresAt = exp.UTC().Format(time.RFC3339)
	}
	return st, nil
}

func (rm *Room) active(clinicID string, now time.Time) (Instance, error) {
	w, ok := rm.gate.windows[clinicID]
	if !ok {
		return Instance{}, berth.Errorf(berth.CodeNotFound, "clinic %s has no waiting room", clinicID)
	}
	in, ok := w.Active(now)
	if !ok {
		e := berth.Errorf(berth.CodeNotFound, "the waiting room of clinic %s is not open now", clinicID)
		if next, ok := w.On(now); ok && now.Before(next.Start) {
			e.Extra = map[string]any{"starts_at": next.Start.UTC().Format(time.RFC3339), "opens_at": next.Opens.UTC().Format(time.RFC3339)}
		}
		return Instance{}, e
	}
	return in, nil
}

func (rm *Room) unavailable(ctx context.Context, what string, err error) error {
	rm.opts.Logger.WarnContext(ctx, "waiting room: redis", "op", what, "err", err)
	return &berth.Error{Code: berth.CodeUnavailable, Detail: "the waiting room is unavailable", RetryAfter: 2,
		Err: fmt.Errorf("%s: %w", what, err)}
}

// ticketError maps a verification failure: unreadable → 400, not ours,
// tampered, expired or for another clinic → 401.
func ticketError(err error) error {
	if errors.Is(err, ErrMalformed) {
		return &berth.Error{Code: berth.CodeInvalidRequest, Detail: "ticket: malformed", Err: err,
			Fields: []berth.FieldError{{Field: "ticket", Message: "malformed"}}}
	}
	return &berth.Error{Code: berth.CodeUnauthorized, Detail: "the ticket is not valid for this clinic's waiting room", Err: err}
}

func waitSeconds(in Instance, pos int64, now time.Time) int64 {
	d := in.AdmittedAt(pos).Sub(now)
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
