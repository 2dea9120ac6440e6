package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/hookpace/hookpace/admin"
)

// exportDead writes the selected dead letters (all of them when none is
// named) as JSON lines: one object per dead letter with its whole URL,
// stored headers and body (body_base64 when the body is not UTF-8), so that
// an operator can keep them before a volume goes away. Nothing else is
// written to out: it is meant for a file or a pipe.
func exportDead(ctx context.Context, c *admin.Client, sel admin.Selector, out io.Writer) error {
	list, err := c.ExportDead(ctx, sel)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, d := range list.Dead {
		if err := enc.Encode(d); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write dead letters: %w", err)
	}
	return nil
}
