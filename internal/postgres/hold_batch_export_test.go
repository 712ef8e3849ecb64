package postgres

// QueuedHoldsForTest returns how many holds of a room type wait for their
// batch (-1: no hold transaction of it is running).
func (s *Store) QueuedHoldsForTest(hotelID, roomTypeID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[hotelID+"\x00"+roomTypeID]
	if q == nil {
		return -1
	}
	return len(q.waiting)
}

// The guarded statements of a batch's committing round trip (ADR 0030).
const (
	TakeBatchGuardedSQL        = takeBatchGuardedSQL
	CountBatchGuestsGuardedSQL = countBatchGuestsGuardedSQL
	ClaimBatchKeysGuardedSQL   = claimBatchKeysGuardedSQL
)

// GroupWaitingForTest returns how many room types wait for a hold group.
func (s *Store) GroupWaitingForTest() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.groupKeys)
}
