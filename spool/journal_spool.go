package spool

import (
	"context"
	"time"
)

// The spool answers for its journal: each method below is the journal's
// (journal.go), which keeps the history of the spool's webhooks in its
// kept database.

// JournalBody keeps delivered m's request, to be sent again
// (journal.bodies).
func (s *Spool) JournalBody(m *Message) { s.jr.JournalBody(m) }

// Resend queues the webhook r names again from the request the journal
// kept of it.
func (s *Spool) Resend(ctx context.Context, r Ref) (*Message, error) { return s.jr.Resend(ctx, r) }

// Lookup is the journal's entry of the webhook r names, with where it is
// now.
func (s *Spool) Lookup(r Ref) (*View, error) { return s.jr.Lookup(r) }

// List is a page of the journal's entries, newest first.
func (s *Spool) List(q Query) ([]*Entry, Cursor, error) { return s.jr.List(q) }

// JournalUsage says what the journal holds.
func (s *Spool) JournalUsage() JournalUsage { return s.jr.JournalUsage() }

// SweepJournal removes what the journal's retention lets go as of now.
func (s *Spool) SweepJournal(now time.Time) (int, error) { return s.jr.SweepJournal(now) }

// RecordAttempt journals one attempt of m.
func (s *Spool) RecordAttempt(m *Message, a Attempt) { s.jr.RecordAttempt(m, a) }

// JournalResponseBody is how much of an answer's body the journal keeps
// (0: none).
func (s *Spool) JournalResponseBody() int { return s.jr.JournalResponseBody() }
