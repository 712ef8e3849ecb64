// Package view is the vocabulary of the per-guest view of every
// reservation and appointment: its items and how booking events project
// into them, the keyset positions that page through a guest's items, the
// partners whose keys read it, what a rebuild or a verification of the
// view reports, and the notifications queued for a guest. It does no I/O: the read model's HTTP API and projector
// (readmodel), the store that keeps the view (postgres) and the notifier
// all speak of these values.
package view

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// ErrNotFound reports an item (or a partner key) missing from the view.
var ErrNotFound = errors.New("not in the view")

// Query selects a page of a guest's items.
type Query struct {
	GuestID string
	Kind    string // "" for all
	Status  string // "" for all
	Limit   int
	After   *Position
}

// Position is a keyset position in a guest's items.
type Position struct {
	SortAt      time.Time `json:"s"`
	Kind        string    `json:"k"`
	PartitionID string    `json:"p"`
	ID          string    `json:"i"`
}

// Partner is a holder of an API key.
type Partner struct {
	ID        string     `json:"partner_id"`
	Name      string     `json:"name"`
	KeyPrefix string     `json:"key_prefix"`
	Scope     string     `json:"scope"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// ScopeGuestReservations lets a key read any guest's reservations.
const ScopeGuestReservations = "guests.reservations:read"

const keyPrefix = "bpk_"

// HashKey is what is stored of a key. A key has 256 random bits, so a plain
// SHA-256 (no salt, no stretching) cannot be brute-forced, and it lets the
// lookup be an index probe.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// LooksLikeKey reports whether key could be a partner key at all, so a
// lookup is not spent on anything else.
func LooksLikeKey(key string) bool {
	return strings.HasPrefix(key, keyPrefix) && len(key) <= 100
}

// NewPartner names a new partner and draws its key; only the key's hash
// (HashKey) is stored, so the key cannot be shown again.
func NewPartner(name string) (Partner, string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 {
		return Partner{}, "", errors.New("a partner needs a name of 1 to 200 characters")
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return Partner{}, "", fmt.Errorf("generate key: %w", err)
	}
	key := keyPrefix + base64.RawURLEncoding.EncodeToString(raw)
	return Partner{ID: uuid.NewString(), Name: name, KeyPrefix: key[:len(keyPrefix)+6], Scope: ScopeGuestReservations}, key, nil
}

// RebuildReport says what a rebuild did.
type RebuildReport struct {
	Written map[string]int // kind → rows written
	Removed int            // view rows without a source row
}

// Difference is one disagreement between the view and the booking tables.
type Difference struct {
	Kind, PartitionID, ID string
	Problem               string // missing_in_view | extra_in_view | mismatch
	Detail                string
}

func (d Difference) String() string {
	return fmt.Sprintf("%s %s/%s: %s %s", d.Problem, d.Kind, d.PartitionID, d.ID, d.Detail)
}

// Compare names the fields in which the view's item got differs from the
// booking row's item want (guest, status, version, start, end); "" when
// they agree.
func Compare(want, got Item) string {
	var d []string
	add := func(field, w, g string) {
		if w != g {
			d = append(d, fmt.Sprintf("%s db=%q view=%q", field, w, g))
		}
	}
	add("guest_id", want.GuestID, got.GuestID)
	add("status", want.Status, got.Status)
	add("version", fmt.Sprint(want.Version), fmt.Sprint(got.Version))
	add("start", want.Start, got.Start)
	add("end", want.End, got.End)
	return strings.Join(d, "; ")
}

// Grant is a guest's consent that a partner reads their reservations.
type Grant struct {
	GuestID     string    `json:"guest_id"`
	PartnerID   string    `json:"partner_id"`
	PartnerName string    `json:"partner_name"`
	GrantedAt   time.Time `json:"granted_at"`
}

// Notification is one message to one recipient on one channel.
type Notification struct {
	Key      string // event id or reminder key; with Channel, the dedup key
	Channel  string
	Template string
	To       string
	Subject  string
	Body     string
}

// ClaimedNotification is a notification claimed for sending, with the
// number of attempts including this one.
type ClaimedNotification struct {
	Notification
	Attempts int
}
