package fleet

import (
	"context"
	"time"
)

// A pause or resume on one replica is every replica's: the dispatcher
// records it durably and tells the gates (Tell), which record it in
// Redis. Another replica learns a pause from the answer to its next ask,
// and a resume from syncPauses, which asks Redis about this replica's
// paused hosts every pauseSyncEvery, whether or not they have webhooks
// queued. Either goes back to the dispatcher (Bind's paused), which
// records it durably and sets the gate, as it does an operator's.

// pauseSyncEvery is how often a replica asks the fleet about its paused
// hosts.
const pauseSyncEvery = time.Second

// pauseSync is the gates' side of pauses, guarded by their mutex.
type pauseSync struct {
	timer *time.Timer // armed while a host is paused
	// untold are the hosts paused here while Redis did not answer: they
	// are told again, and what Redis says of them (an older resume) does
	// not resume them.
	untold map[string]bool
	// told counts the pauses and resumes told per host, so that an
	// answer that left before one is not applied after it.
	told map[string]uint64
	// word is the fleet's pause word (Limiter.PauseWord) when the states
	// were last asked for, and at when: they are asked for again when it
	// changes, and every pauseSyncFull all the same.
	word   string
	wordAt time.Time
}

// pauseSyncFull is how often the states of the paused hosts are asked for
// even though the fleet's pause word did not change.
const pauseSyncFull = 30 * time.Second

// Tell implements deliver.Gates: it records a pause or resume made here
// in Redis.
func (gs *Gates) Tell(host string, paused bool) bool {
	var err error
	if paused {
		err = gs.lim.Pause(context.Background(), host)
	} else {
		err = gs.lim.Resume(context.Background(), host)
	}
	gs.mu.Lock()
	if gs.pauses.told == nil {
		gs.pauses.told, gs.pauses.untold = map[string]uint64{}, map[string]bool{}
	}
	gs.pauses.told[host]++
	if paused && err != nil {
		gs.pauses.untold[host] = true
	} else {
		delete(gs.pauses.untold, host)
	}
	gs.mu.Unlock()
	if err != nil {
		what := "host resumed on this replica only: the fleet did not answer"
		if paused {
			what = "host paused on this replica only until the fleet answers"
		}
		gs.log.Warn(what, "host", host, "error", err.Error())
	}
	return err == nil
}

// armPauseSync makes sure the fleet is asked about paused hosts while
// there are any. Called with the gates' mutex held.
func (gs *Gates) armPauseSync() {
	if gs.pauses.timer != nil || gs.stopping {
		return
	}
	gs.pauses.timer = time.AfterFunc(pauseSyncEvery, func() {
		gs.mu.Lock()
		if gs.stopping {
			gs.mu.Unlock()
			return
		}
		gs.wg.Add(1) // Stop waits for a sync under way
		gs.mu.Unlock()
		defer gs.wg.Done()
		more := gs.syncPauses()
		gs.mu.Lock()
		defer gs.mu.Unlock()
		gs.pauses.timer = nil
		if more {
			gs.armPauseSync()
		}
	})
}

// syncPauses asks the fleet about the hosts paused here, in one round
// trip: one resumed elsewhere is resumed here (by the dispatcher, which
// clears its record); one the fleet does not know paused (Redis lost it,
// or it expired) is paused in the fleet again, as the record here says.
// It reports whether any host is paused here.
func (gs *Gates) syncPauses() bool {
	gs.mu.Lock()
	var names []string
	var told []uint64
	paused := false
	for name, g := range gs.hosts {
		// A host whose Cluster slot is down is asked about once it is up.
		if g.pace.Paused() {
			paused = true
			if !g.degraded {
				names = append(names, name)
				told = append(told, gs.pauses.told[name])
			}
		}
	}
	gs.mu.Unlock()
	if len(names) == 0 {
		return paused
	}
	word, err := gs.lim.PauseWord(context.Background())
	if err != nil && !gs.lim.cluster() {
		return true // the limiter is degraded; its heartbeat looks for Redis
	}
	// On a Cluster whose master holding the word is down, every second
	// asks for the states (word "" never matches).
	gs.mu.Lock()
	same := word != "" && word == gs.pauses.word && time.Since(gs.pauses.wordAt) < pauseSyncFull && len(gs.pauses.untold) == 0
	gs.mu.Unlock()
	if same {
		return true
	}
	states, err := gs.lim.PauseStates(context.Background(), names)
	if err != nil {
		return true
	}
	gs.mu.Lock()
	gs.pauses.word, gs.pauses.wordAt = word, time.Now()
	gs.mu.Unlock()
	for i, name := range names {
		gs.mu.Lock()
		untold, since := gs.pauses.untold[name], gs.pauses.told[name] != told[i]
		gs.mu.Unlock()
		switch {
		case untold:
			gs.Tell(name, true)
		case since:
			// Paused or resumed here since the question left: that wins.
		case states[i] == Resumed:
			gs.paused(name, false)
		case states[i] == PauseUnknown:
			gs.Tell(name, true)
		}
	}
	return true
}
