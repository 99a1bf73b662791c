package server

// RoomWaiters is how many enqueues wait for room in queue, for tests that
// must act once a producer waits.
func (s *Server) RoomWaiters(queue string) int {
	s.rooms.mu.Lock()
	defer s.rooms.mu.Unlock()
	return len(s.rooms.queues[queue])
}
