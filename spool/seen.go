package spool

// Seen reports whether an idempotency key is remembered for host within
// scope: a webhook with that key was taken there within its host's
// dedupe window (an unexpired record), whatever became of it since.
// It reads; it never writes.
func (s *Spool) Seen(host, scope, key string) bool {
	if key == "" || len(key) > MaxIdempotencyKey {
		return false
	}
	_, _, ok := s.lookupOnce(scopedOnceKey(host, scope, key))
	return ok
}
