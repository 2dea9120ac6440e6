package handoff

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// An ordering key goes to the other hookpace as one unit, a batch: its
// webhooks, in their order, each in a request of its own (a chunk) that
// carries BatchHeader. The other hookpace stores nothing of a batch until
// its last chunk has come: it holds the others in memory (staged,
// answered 200 with StagedHeader), and the last one, marked "last", makes
// it append them all, in order, and answer 202 once every one is durable
// (StoredHeader says how many). Until then nothing of the key can be
// delivered there, and nothing of it has been removed here: a hand-off
// that ends before the last chunk's 202 leaves the key here whole, and
// what was staged there is dropped. The rule both ends keep is:
//
//	the sender removes a key's webhooks only once the receiver answered
//	its last chunk with 202 and StoredHeader naming them all; the
//	receiver releases none of a key's webhooks for delivery before it has
//	stored every one before it in the batch.
//
// The last chunk is the key's last webhook sent again, with "last" and
// its index: the sender learns a key has ended only once its host's queue
// is read. A receiver that lost a batch (it restarted; it dropped one
// idle for stagingIdle) answers a chunk past the first with 409, and the
// sender sends the key again under a new batch id. If the receiver's
// spool refuses a webhook while it stores a batch, it stops there and
// answers with StoredHeader saying how many of the first it stored: the
// sender removes those and sends the rest as a new batch. A crash of the
// receiver within its commit is the one way it holds a key's first
// webhooks without the 202: the sender, which still has them all, sends
// the key again when it is back, and a receiver that checks the claims
// (shutdown.handoff_secret_file) keeps the ones it stored by their ids
// and appends only the rest after them.

// BatchHeader names a chunk's batch and its place in it:
// "id=<32 hex digits>; n=<index from 0>", with "; last" on the chunk that
// ends the batch.
const BatchHeader = "X-Hookpace-Handoff-Batch"

// BatchSignatureHeader signs BatchHeader over the chunk's claim, with the
// hand-off secret: "v1=" and 64 hex digits.
const BatchSignatureHeader = "X-Hookpace-Handoff-Batch-Signature"

// StagedHeader, on a 200, says how many webhooks of the batch the
// receiver holds, staged, none of them stored.
const StagedHeader = "X-Hookpace-Handoff-Staged"

// StoredHeader, on the answer to a batch's last chunk, says how many of
// the batch's webhooks, from its first, the receiver has stored.
const StoredHeader = "X-Hookpace-Handoff-Stored"

// Batch is a BatchHeader value.
type Batch struct {
	ID   string // 32 hex digits, new for each attempt at a key
	N    int    // the chunk's index in the batch
	Last bool   // the chunk ends the batch: store it
}

// NewBatchID returns a batch id no other batch has.
func NewBatchID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Encode is the BatchHeader value.
func (b Batch) Encode() string {
	s := "id=" + b.ID + "; n=" + strconv.Itoa(b.N)
	if b.Last {
		s += "; last"
	}
	return s
}

// MaxBatchLen bounds the webhooks of one batch.
const MaxBatchLen = 1 << 20

// ParseBatch reads a BatchHeader value.
func ParseBatch(v string) (Batch, error) {
	var b Batch
	seenN := false
	for _, part := range strings.Split(v, ";") {
		k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "id":
			if len(val) != 32 || strings.Trim(val, "0123456789abcdef") != "" {
				return Batch{}, fmt.Errorf("%s: id %q: want 32 lower-case hex digits", BatchHeader, val)
			}
			b.ID = val
		case "n":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 || n >= MaxBatchLen {
				return Batch{}, fmt.Errorf("%s: n %q: want 0 to %d", BatchHeader, val, MaxBatchLen-1)
			}
			b.N, seenN = n, true
		case "last":
			b.Last = true
		default:
			return Batch{}, fmt.Errorf("%s: unknown part %q", BatchHeader, part)
		}
	}
	if b.ID == "" || !seenN {
		return Batch{}, errors.New(BatchHeader + ": want an id and an n")
	}
	return b, nil
}

// SignBatch returns the BatchSignatureHeader value for batch (the
// BatchHeader value) on the chunk with the given claim.
func SignBatch(secret []byte, claim, batch string) string {
	return "v1=" + hexMAC(secret, "hookpace-handoff-batch-v1", []string{claim}, []byte(batch))
}

// VerifyBatch checks a BatchSignatureHeader value.
func VerifyBatch(secret []byte, sig, claim, batch string) error {
	if sig == "" {
		return errors.New(BatchHeader + " without " + BatchSignatureHeader)
	}
	if !macEqual(sig, SignBatch(secret, claim, batch)) {
		return errors.New(BatchHeader + " whose " + BatchSignatureHeader + " does not check (another secret, or a forged claim)")
	}
	return nil
}
