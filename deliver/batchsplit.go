package deliver

// Splitting a batch the partner finds too large: a 413, or a
// 400 whose answer speaks of a size, to a batch of two or more sends its
// two halves again at once, first in line, and so on down to single
// webhooks; only a webhook alone is judged by the answer (a 413 to one
// webhook is a dead letter, as before). A split is not an attempt: no
// member's attempts grow, nothing is persisted, max_age is not checked.

import (
	"bytes"
	"net/http"
)

// answerMax is how much of a 400's body is read to look for a size.
const answerMax = 1 << 10

// sizeWords are what a 400 that refuses a request for its size says, in
// the words partners use (lower case).
var sizeWords = [][]byte{
	[]byte("too large"), []byte("too big"), []byte("too long"), []byte("too many"),
	[]byte("exceed"), []byte("size limit"), []byte("max size"), []byte("maximum size"),
	[]byte("batch size"), []byte("payload size"), []byte("body size"), []byte("request size"),
	[]byte("entity too"), []byte("max_size"), []byte("max_events"), []byte("max_items"),
}

// tooLarge reports whether an answer says the request was too large: a
// 413, or a 400 whose body speaks of a size.
func tooLarge(status int, answer []byte) bool {
	switch status {
	case http.StatusRequestEntityTooLarge:
		return true
	case http.StatusBadRequest:
		a := bytes.ToLower(answer)
		for _, w := range sizeWords {
			if bytes.Contains(a, w) {
				return true
			}
		}
	}
	return false
}
