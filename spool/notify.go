package spool

// Notify makes the spool announce, from now on, every message that becomes
// durable (new, or replayed from the dead letters): fn is called by the
// spool's writer goroutine, in id order, once per commit, and must not
// block for long. Messages that became durable before are not announced:
// the listener finds them with Hosts and Read. A later call replaces fn.
func (s *Spool) Notify(fn func([]*Message)) { s.notify.Store(&fn) }

// announce passes what a commit made durable to the listener, if any.
func (s *Spool) announce(msgs []*Message) {
	if fn := s.notify.Load(); fn != nil {
		(*fn)(msgs)
	}
}
