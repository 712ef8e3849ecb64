package searchindex

import (
	"fmt"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/reservation"
)

// maxSpanDays bounds the nights kept per room type (a sale window is 365
// nights; twice that plus slack covers a year of history): a night outside
// the span is dropped rather than growing memory without bound.
const maxSpanDays = 1100

// slot is one night of a room type: what is left, and the night's version
// plus one (0 means the night is unknown).
type slot struct {
	avail int32
	ver   uint32
}

// nights is the nights of one room type, day first onward.
type nights struct {
	first int32 // days since 1970-01-01
	s     []slot
}

// summary is what is left of every room type and night, from
// inventory.changed events: seconds stale, merged by each night's version,
// never used for a write decision.
type summary struct {
	mu    sync.RWMutex
	rooms map[string]*nights
}

// dayNumber is the number of a YYYY-MM-DD date: days since 1970-01-01.
func dayNumber(d reservation.Date) int32 {
	return int32(d.Time().Unix() / 86400)
}

// parsed is one night to merge: its day number, what is left and its
// version plus one.
type parsed struct {
	day   int32
	avail int32
	ver   uint32
}

// apply merges nights of a room type, keeping each night's newest version.
func (s *summary) apply(roomTypeID string, counts []reservation.NightCount) (int, error) {
	ps := make([]parsed, 0, len(counts))
	for _, c := range counts {
		d, err := reservation.ParseDate(c.Night)
		if err != nil {
			return 0, fmt.Errorf("night %q: %w", c.Night, err)
		}
		p, err := night(dayNumber(d), c.Available, c.Version)
		if err != nil {
			return 0, fmt.Errorf("night %s: %w", c.Night, err)
		}
		ps = append(ps, p)
	}
	return s.merge(roomTypeID, ps), nil
}

// applySnapshot merges a room type's nights as a snapshot read them
// (columns, days counted from the day numbered from): the same merge by
// version as apply, without a date text per night.
func (s *summary) applySnapshot(from int32, rn reservation.RoomNights) (int, error) {
	if len(rn.Offsets) != len(rn.Available) || len(rn.Offsets) != len(rn.Versions) {
		return 0, fmt.Errorf("room type %s: %d nights, %d counts, %d versions", rn.RoomTypeID, len(rn.Offsets), len(rn.Available), len(rn.Versions))
	}
	ps := make([]parsed, len(rn.Offsets))
	for i, off := range rn.Offsets {
		p, err := night(from+off, int(rn.Available[i]), rn.Versions[i])
		if err != nil {
			return 0, fmt.Errorf("room type %s, night +%d: %w", rn.RoomTypeID, off, err)
		}
		ps[i] = p
	}
	return s.merge(rn.RoomTypeID, ps), nil
}

func night(day int32, avail int, version int64) (parsed, error) {
	if version < 0 || version >= 1<<32-1 {
		return parsed{}, fmt.Errorf("version %d out of range", version)
	}
	return parsed{day, int32(max(avail, 0)), uint32(version) + 1}, nil
}

// merge keeps each night's newest version.
func (s *summary) merge(roomTypeID string, ps []parsed) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.rooms[roomTypeID]
	changed := 0
	for _, p := range ps {
		if n == nil {
			n = &nights{first: p.day, s: make([]slot, 0, len(ps))}
			s.rooms[roomTypeID] = n
		}
		i := int(p.day - n.first)
		if i < 0 {
			// An earlier night: shift, within the bound.
			if len(n.s)-i > maxSpanDays {
				continue
			}
			grown := make([]slot, len(n.s)-i)
			copy(grown[-i:], n.s)
			n.s, n.first, i = grown, p.day, 0
		}
		if i >= len(n.s) {
			if i >= maxSpanDays {
				continue
			}
			n.s = append(n.s, make([]slot, i+1-len(n.s))...)
		}
		if n.s[i].ver >= p.ver {
			continue
		}
		n.s[i] = slot{avail: p.avail, ver: p.ver}
		changed++
	}
	return changed
}

// minFree returns the least left over the nights [from, to) of a room type;
// ok is false when a night is unknown (no inventory loaded).
func (s *summary) minFree(roomTypeID string, from, to int32) (left int, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := s.rooms[roomTypeID]
	if n == nil || from < n.first || int(to-n.first) > len(n.s) || to <= from {
		return 0, false
	}
	left = -1
	for _, sl := range n.s[from-n.first : to-n.first] {
		if sl.ver == 0 {
			return 0, false
		}
		if left < 0 || int(sl.avail) < left {
			left = int(sl.avail)
		}
	}
	return left, true
}

func (s *summary) size() (rooms, known int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, n := range s.rooms {
		for _, sl := range n.s {
			if sl.ver > 0 {
				known++
			}
		}
	}
	return len(s.rooms), known
}

// today is the current UTC date (a variable for tests).
var today = func() reservation.Date { return reservation.DateOf(time.Now().UTC()) }
