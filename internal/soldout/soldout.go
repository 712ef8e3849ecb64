// Package soldout is a booking service's negative cache: "room type R of
// hotel H has fewer than q rooms on night N", learnt from the sold-out
// answers the database gave this process. It is consulted only to refuse —
// a hold it does not refuse goes to the database, which alone decides a
// win — so a flash sale's losers are answered without queueing behind the
// winners for the database.
//
// An entry is dropped when rooms may have come back: by the process's own
// freeing commits (cancel, expiry, new inventory) the moment they return,
// by events of other processes' commits, and after the TTL — plus the one
// hold then let through to the database — at the latest.
// A refusal learnt by a hold that started before such a drop is not kept
// (per-hotel generations), so a freeing commit is never undone by a late
// answer computed before it.
package soldout

import (
	"sync"
	"time"
)

// Cache is safe for concurrent use. The zero value is not usable; New.
type Cache struct {
	ttl time.Duration
	now func() time.Time

	mu     sync.Mutex
	hotels map[string]*hotel
}

type hotel struct {
	gen uint64
	// lack maps room type → night → the smallest quantity refused on that
	// night, and when it was learnt.
	lack map[string]map[string]entry
}

type entry struct {
	qty int
	at  time.Time
	// probe is when a hold was let through to the database to refresh the
	// expired entry; until its answer (or a further TTL) the others are
	// still refused, so an expiry does not send a whole crowd at once.
	probe time.Time
}

// New returns a cache whose entries live at most ttl; now is the clock
// (nil: time.Now).
func New(ttl time.Duration, now func() time.Time) *Cache {
	if now == nil {
		now = time.Now
	}
	return &Cache{ttl: ttl, now: now, hotels: map[string]*hotel{}}
}

// TTL returns how long an entry lives at most.
func (c *Cache) TTL() time.Duration { return c.ttl }

// Generation returns the hotel's generation, to pass to Learn: read it
// before asking the database.
func (c *Cache) Generation(hotelID string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.hotels[hotelID]; h != nil {
		return h.gen
	}
	return 0
}

// Learn records that the database refused qty rooms of the room type on
// nights — unless the hotel's rooms may have come back since gen was read.
func (c *Cache) Learn(hotelID, roomTypeID string, nights []string, qty int, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.hotels[hotelID]
	if h == nil {
		if gen != 0 {
			return
		}
		h = &hotel{lack: map[string]map[string]entry{}}
		c.hotels[hotelID] = h
	}
	if h.gen != gen {
		return
	}
	rt := h.lack[roomTypeID]
	if rt == nil {
		rt = map[string]entry{}
		h.lack[roomTypeID] = rt
	}
	now := c.now()
	for _, n := range nights {
		if e, ok := rt[n]; ok && e.qty < qty && now.Sub(e.at) < c.ttl {
			continue // a smaller refusal is fresh already
		}
		rt[n] = entry{qty: qty, at: now}
	}
}

// Refuses returns the nights of the stay known to lack qty rooms, or nil
// when the cache knows of none (then only the database can answer). When
// what it knows has expired, the first caller gets nil — it asks the
// database, and its answer refreshes the entry (Learn) or drops it (Taken)
// — and the others are still refused until that answer, or a further TTL
// if it never comes.
func (c *Cache) Refuses(hotelID, roomTypeID string, nights []string, qty int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.hotels[hotelID]
	if h == nil {
		return nil
	}
	rt := h.lack[roomTypeID]
	now := c.now()
	var short, stale, probing []string
	for _, n := range nights {
		e, ok := rt[n]
		switch {
		case !ok || qty < e.qty:
		case now.Sub(e.at) < c.ttl:
			short = append(short, n)
		case !e.probe.IsZero() && now.Sub(e.probe) < c.ttl:
			probing = append(probing, n)
		case now.Sub(e.at) >= 2*c.ttl && e.probe.IsZero():
			delete(rt, n) // long unused
		default:
			stale = append(stale, n)
		}
	}
	if len(short) > 0 {
		return short
	}
	if len(probing) > 0 {
		return probing
	}
	for _, n := range stale {
		e := rt[n]
		e.probe = now
		rt[n] = e
	}
	return nil
}

// Taken drops what the cache knows of nights a hold just took: the rooms
// were there.
func (c *Cache) Taken(hotelID, roomTypeID string, nights []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.hotels[hotelID]; h != nil {
		for _, n := range nights {
			delete(h.lack[roomTypeID], n)
		}
	}
}

// Forget drops what the cache knows of a hotel: rooms may have come back.
func (c *Cache) Forget(hotelID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.hotels[hotelID]
	if h == nil {
		// Remember the drop, so a refusal learnt before it is not kept.
		c.hotels[hotelID] = &hotel{gen: 1, lack: map[string]map[string]entry{}}
		return
	}
	h.gen++
	clear(h.lack)
}
