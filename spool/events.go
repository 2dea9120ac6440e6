package spool

// AppendEvent is Append for hookpace's own operational events (package
// events): an event says that the spool is past its high-water mark, so
// it must be stored when webhooks are refused for that. The watermarks
// don't apply; max bounds what the event's host may hold instead (0: no
// bound), so that a destination that never answers can't grow the spool
// without limit. A full disk, a directory gone and a closed spool still
// refuse it, as they refuse any write.
func (s *Spool) AppendEvent(m *Message, max int64) error {
	m.Spool = s.instance
	m.Origin, m.OriginSpool = 0, 0
	val := m.record()
	if len(val) > MaxRecordSize {
		return &WriteError{Err: ErrTooLarge}
	}
	o := &appendOp{opBase: opBase{msg: m, done: make(chan error, 1)}, val: val, size: storedSize(m.Host, val)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if u := s.ledger.hosts[m.Host]; max > 0 && u != nil && u.Messages >= max {
		s.mu.Unlock()
		return &FullError{Host: m.Host, Over: u.Messages - max + 1}
	}
	s.ledger.add(m.Host, 1, o.size)
	s.mu.Unlock()
	return s.submitAppend(o, m)
}
