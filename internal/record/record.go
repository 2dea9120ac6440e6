// Package record holds the pieces of the spool's and the journal's record
// encodings that both write: length-prefixed strings, Unix nanoseconds
// with 0 for the zero time, and a decoder that stops at the first error.
package record

import (
	"encoding/binary"
	"errors"
	"time"
)

// ErrCorrupt: a record ends early or says a length longer than itself.
var ErrCorrupt = errors.New("corrupt message record")

// AppendString appends s as a uvarint length and its bytes.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// UnixNano is t in Unix nanoseconds, 0 for the zero time.
func UnixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// TimeOf is the inverse of UnixNano.
func TimeOf(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// BeUint64 reads a big-endian uint64 (b holds at least 8 bytes).
func BeUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

// Decoder reads a record from B. After the first error (Err, ErrCorrupt)
// every read returns the zero value.
type Decoder struct {
	B   []byte
	Err error
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if d.Err != nil || len(d.B) == 0 {
		d.Err = ErrCorrupt
		return 0
	}
	c := d.B[0]
	d.B = d.B[1:]
	return c
}

// Uint64 reads 8 bytes, big-endian.
func (d *Decoder) Uint64() uint64 {
	if d.Err == nil && len(d.B) < 8 {
		d.Err = ErrCorrupt
	}
	if d.Err != nil {
		return 0
	}
	v := binary.BigEndian.Uint64(d.B)
	d.B = d.B[8:]
	return v
}

// Uvarint reads a uvarint.
func (d *Decoder) Uvarint() uint64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Err = ErrCorrupt
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Varint reads a varint.
func (d *Decoder) Varint() int64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.Err = ErrCorrupt
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Bytes reads a length-prefixed string as a copy: the caller owns it
// (Badger's value buffers are reused).
func (d *Decoder) Bytes() []byte {
	n := d.Uvarint()
	if d.Err != nil {
		return nil
	}
	if n > uint64(len(d.B)) {
		d.Err = ErrCorrupt
		return nil
	}
	out := make([]byte, n)
	copy(out, d.B[:n])
	d.B = d.B[n:]
	return out
}

// Str reads a length-prefixed string.
func (d *Decoder) Str() string { return string(d.Bytes()) }

// Raw reads a length-prefixed string as a slice of B, not a copy: for
// what is read, or skipped, before the buffer is let go.
func (d *Decoder) Raw() []byte {
	n := d.Uvarint()
	if d.Err == nil && n > uint64(len(d.B)) {
		d.Err = ErrCorrupt
	}
	if d.Err != nil {
		return nil
	}
	out := d.B[:n:n]
	d.B = d.B[n:]
	return out
}
