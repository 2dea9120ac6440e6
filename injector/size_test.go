package injector_test

import (
	"fmt"
	"strings"
)

// bigPod is a labelled Pod of n containers with env variables each, as
// the API server sends it.
func bigPod(n, env int) []byte {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"big","namespace":"shop","labels":{"hookpace.dev/inject":"enabled"}},"spec":{"containers":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"c%d","image":"registry.example.com/app:1","env":[`, i)
		for j := range env {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"name":"VAR_%d","value":"value-%d-%d"}`, j, i, j)
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`],"restartPolicy":"Always"}}`)
	return []byte(b.String())
}
