package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// On a Redis Cluster each master holds its own slots, and a master that
// fails (until a replica takes over, or for good without one) loses only
// the hosts whose keys hash to them. So on a Cluster the Limiter is never
// degraded as a whole: a command that fails marks its key's slot down,
// the hosts in down slots pace alone on their share (HostDegraded), and
// every other host keeps the fleet's shared limits. Asks for a host in a
// down slot are not sent (they would wait for the same failure); the
// heartbeat probes each down slot with one EXISTS of a key in it, and a
// slot that answers (its master is back, or another took it over) is up
// again. On one Redis or behind Sentinel every host lives on one node,
// so any failure degrades the whole Limiter, as before.

// errSlotDown is the error of a call not sent: its slot did not answer.
var errSlotDown = errors.New("its redis cluster slot does not answer")

// slotDown is one Cluster slot that did not answer.
type slotDown struct {
	since time.Time
	key   string // a key in the slot, to probe it with
}

// keySlot is the Redis Cluster slot of key: CRC16 (XMODEM) of its hash
// tag, the part between the first { and the next }, if not empty.
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc & 16383
}

// cluster reports whether the Limiter shares limits through a Redis
// Cluster, where a failure is a slot's, not the whole fleet's.
func (l *Limiter) cluster() bool { return len(l.opts.Cluster) > 0 }

// HostDegraded reports whether host paces alone on its share: the whole
// Limiter is degraded, or (on a Cluster) the host's slot does not answer.
func (l *Limiter) HostDegraded(host string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.degraded {
		return true
	}
	if len(l.down) == 0 {
		return false
	}
	_, down := l.down[keySlot(l.key(host, ""))]
	return down
}

// degradedNow is HostDegraded from one snapshot of the state, for many
// hosts at once: the host's slot is slotOf's (-1 off a Cluster).
func (l *Limiter) degradedNow() func(slot int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.degraded {
		return func(int) bool { return true }
	}
	down := make(map[int]bool, len(l.down))
	for s := range l.down {
		down[int(s)] = true
	}
	return func(slot int) bool { return down[slot] }
}

// SlotsDown is how many Cluster slots do not answer now (0 elsewhere),
// and the last error one gave.
func (l *Limiter) SlotsDown() (n int, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.down), l.slotErr
}

// isDown reports whether key's slot is known down. Called with l.mu held.
func (l *Limiter) isDown(key string) bool {
	if len(l.down) == 0 {
		return false
	}
	_, ok := l.down[keySlot(key)]
	return ok
}

// failKeys records that the commands on keys failed with err: on a
// Cluster their slots are down (logged when the first goes down), on one
// Redis the whole Limiter is degraded (fail).
func (l *Limiter) failKeys(err error, keys []string) {
	if !l.cluster() {
		l.fail(err)
		return
	}
	if len(keys) == 0 {
		return
	}
	now := l.now()
	l.mu.Lock()
	if l.down == nil {
		l.down = make(map[uint16]slotDown)
	}
	var added []uint16
	for _, k := range keys {
		s := keySlot(k)
		if _, ok := l.down[s]; !ok {
			l.down[s] = slotDown{since: now, key: k}
			added = append(added, s)
		}
	}
	l.slotErr = err.Error()
	first := len(added) > 0 && len(l.down) == len(added)
	fns := l.onChange
	l.mu.Unlock()
	if len(added) == 0 {
		return
	}
	l.recall.slotsFailed(added, now)
	if first {
		l.obs.FleetFallback()
		l.log.Warn("fleet degraded in part: redis cluster slots do not answer; their hosts pace with a local share, the others stay shared",
			"slots", len(added), "error", err.Error())
	}
	for _, fn := range fns {
		fn()
	}
}

// probeSlots asks each down slot, in one round trip, whether it answers
// again (EXISTS of a key in it), and brings those that do up. It logs
// when any came back, with how many are still down.
func (l *Limiter) probeSlots(ctx context.Context) {
	l.mu.Lock()
	probes := make(map[uint16]string, len(l.down))
	for s, d := range l.down {
		probes[s] = d.key
	}
	l.mu.Unlock()
	if len(probes) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	cmds := make(map[uint16]*redis.IntCmd, len(probes))
	start := time.Now()
	_, err := l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for s, k := range probes {
			cmds[s] = p.Exists(ctx, k)
		}
		return nil
	})
	l.obs.FleetRoundTrip("probe", time.Since(start), err)
	now := l.now()
	var up []uint16
	l.mu.Lock()
	for s, c := range cmds {
		if c.Err() == nil {
			delete(l.down, s)
			up = append(up, s)
		}
	}
	left, fns := len(l.down), l.onChange
	l.mu.Unlock()
	if len(up) == 0 {
		return
	}
	l.recall.slotsAnswered(up, now)
	l.log.Info("fleet shared again for part of the cluster: redis cluster slots answer", "slots", len(up),
		"still_down", left)
	for _, fn := range fns {
		fn()
	}
}

// slotsState describes the Cluster's down slots and the hosts degraded
// (the first few by name) for the status page.
func (l *Limiter) slotsState(hosts []string) string {
	n, _ := l.SlotsDown()
	if n == 0 {
		return "shared"
	}
	slices.Sort(hosts)
	named := strings.Join(hosts[:min(len(hosts), 5)], ", ")
	if len(hosts) > 5 {
		named += fmt.Sprintf(" and %d more", len(hosts)-5)
	}
	if named != "" {
		named = ": " + named
	}
	// The status page appends " through Redis".
	return fmt.Sprintf("%d host%s degraded to a local share (%d Redis Cluster slot%s not answering)%s; the others shared",
		len(hosts), plural(len(hosts)), n, plural(n), named)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
