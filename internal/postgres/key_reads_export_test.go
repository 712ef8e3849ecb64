package postgres

// SetKeyReadPauseForTest replaces the linger before a next read of refused
// holds' keys (keyReadLinger) with pause.
func (s *Store) SetKeyReadPauseForTest(pause func()) { s.keyReadPause = pause }

// WaitingKeysForTest returns how many keys of hotelID wait for its next
// read (-1: no read of its keys is in flight).
func (s *Store) WaitingKeysForTest(hotelID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.keyQueues[hotelID]
	if q == nil {
		return -1
	}
	return len(q.waiting)
}
