package spool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Keys of the lanes (lane.go). A webhook in Lane{} waits under its queue
// key, q <host> 0x00 <id>, as every webhook did before lanes. A webhook in
// any other lane waits under
//
//	l <host> 0x00 <fairness key> 0x00 <priority rank: 1 byte> <id: 8 bytes big-endian>
//
// so that one prefix holds one lane in id (FIFO) order, a host's lanes
// follow each other in (fairness key, rank) order, and reading one lane
// never passes over another lane's keys. A fairness key holds no 0 byte
// (Append refuses one, ErrFairnessKey): the 0 after it ends it, and no key
// is a prefix of another's lane.

const prefixLane = 'l'

// MaxFairnessKey is the longest fairness key the spool stores, in bytes:
// it is part of the key of every webhook of its lane.
const MaxFairnessKey = 256

// ErrFairnessKey: a fairness key that the spool cannot store (see
// checkLaneBytes). Retrying cannot help.
var ErrFairnessKey = errors.New("fairness key is not 1 to 256 printable bytes")

// MaxLaneKey is the longest fairness or ordering key a webhook may carry
// in, in bytes: what ingest and config pass to CheckLaneKey. It is below
// MaxFairnessKey, so every key they take can be stored.
const MaxLaneKey = 200

// CheckLaneKey checks a fairness or ordering key: 1 to max bytes (max at
// most MaxFairnessKey), and key text (CheckKeyText), so none is the 0 byte
// that ends a key in the lane layout and none reads as another key where
// it is shown. It is the one rule for lane keys: ingest applies it to the
// keys requests carry and config to the keys weights name, both with
// MaxLaneKey.
func CheckLaneKey(key string, max int) error {
	if err := checkLaneBytes(key, max); err != nil {
		return err
	}
	return CheckKeyText(key)
}

// checkLaneBytes checks that key is 1 to max bytes (max at most
// MaxFairnessKey) with no control character: what the lane layout needs
// of a key to store it.
func checkLaneBytes(key string, max int) error {
	max = min(max, MaxFairnessKey)
	if key == "" {
		return errors.New("is empty")
	}
	if len(key) > max {
		return fmt.Errorf("is %d bytes, more than %d", len(key), max)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("has a control character (byte %d)", i)
		}
	}
	return nil
}

// CheckKeyText checks that a key hookpace shows is UTF-8 with no control
// character and no bidirectional override or isolate (U+202A-202E,
// U+2066-2069), which would make a key read as another wherever it is
// shown.
func CheckKeyText(s string) error {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return fmt.Errorf("is not UTF-8 (byte %d)", i)
		case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0:
			return fmt.Errorf("has a control character (byte %d)", i)
		case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return fmt.Errorf("has a bidirectional override or isolate, U+%04X (byte %d)", r, i)
		}
	}
	return nil
}

// ErrNotQueued: the message is no longer queued (delivered, dead-lettered,
// purged or handed off).
var ErrNotQueued = errors.New("message is not queued")

// checkFairness reports whether m's fairness key ("": none) can be
// stored.
func checkFairness(key string) error {
	if key == "" {
		return nil
	}
	if err := checkLaneBytes(key, MaxFairnessKey); err != nil {
		return fmt.Errorf("%w: %v", ErrFairnessKey, err)
	}
	return nil
}

// laneHostPrefix is the start of every lane key of host's: l <host> 0x00.
func laneHostPrefix(host string) []byte { return hostPrefix(prefixLane, host) }

// lanePrefix is the start of every key of lane l of host's, l not Lane{}.
func lanePrefix(host string, l Lane) []byte {
	k := make([]byte, 0, len(host)+len(l.Key)+12)
	k = append(k, prefixLane)
	k = append(k, host...)
	k = append(k, 0)
	k = append(k, l.Key...)
	k = append(k, 0, byte(l.Priority.Rank()))
	return k
}

// laneKey is the key of message id of lane l of host's: its queue key for
// Lane{}.
func laneKey(host string, l Lane, id uint64) []byte {
	if l == (Lane{}) {
		return queueKey(host, id)
	}
	return binary.BigEndian.AppendUint64(lanePrefix(host, l), id)
}

// laneKeyLen is len(laneKey(host, l, id)).
func laneKeyLen(host string, l Lane) int {
	if l == (Lane{}) {
		return len(host) + 10
	}
	return len(host) + len(l.Key) + 12
}

// key is the key m's record is stored under: the one place that says so.
func (m *Message) key() []byte { return laneKey(m.Host, m.Lane(), m.ID) }

// storedSize is what m's record val counts against spool.max_bytes: the
// value and its key (see storedSize).
func (m *Message) storedSize(val []byte) int64 {
	return int64(len(val)) + int64(laneKeyLen(m.Host, m.Lane()))
}

// rankPriority is the inverse of Priority.Rank.
func rankPriority(r byte) (Priority, bool) {
	switch r {
	case 0:
		return PriorityHigh, true
	case 1:
		return PriorityNormal, true
	case 2:
		return PriorityLow, true
	}
	return 0, false
}

// parseLaneKey splits a lane key into its host, lane and id.
func parseLaneKey(k []byte) (host string, l Lane, id uint64, ok bool) {
	if len(k) < 1+1+1+1+8 || k[0] != prefixLane {
		return "", Lane{}, 0, false
	}
	rest := k[1 : len(k)-9] // host 0x00 key 0x00
	h := strings.IndexByte(string(rest), 0)
	if h < 0 || h == len(rest)-1 || rest[len(rest)-1] != 0 {
		return "", Lane{}, 0, false
	}
	p, ok := rankPriority(k[len(k)-9])
	l = Lane{Key: string(rest[h+1 : len(rest)-1]), Priority: p}
	if !ok || l == (Lane{}) || strings.IndexByte(l.Key, 0) >= 0 {
		return "", Lane{}, 0, false // Lane{} is never stored under a lane key
	}
	return string(rest[:h]), l, binary.BigEndian.Uint64(k[len(k)-8:]), true
}

// parseAnyKey splits a queue key or a lane key into its host, lane and id.
func parseAnyKey(k []byte) (host string, l Lane, id uint64, ok bool) {
	if len(k) > 0 && k[0] == prefixQueue {
		host, id, ok = parseQueueKey(k)
		return host, Lane{}, id, ok
	}
	return parseLaneKey(k)
}
