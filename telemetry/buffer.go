package telemetry

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// BufferedWriter batches log lines into fewer writes. At tens of thousands
// of webhooks a second, one write(2) per canonical log line costs more than
// the work it describes. Lines are flushed every interval, when the buffer
// fills, and on Close; a crash loses at most the last interval's lines
// (never webhooks: those are in the spool).
type BufferedWriter struct {
	mu   sync.Mutex
	buf  *bufio.Writer
	stop chan struct{}
	done chan struct{}
}

// NewBufferedWriter wraps w, flushing every interval.
func NewBufferedWriter(w io.Writer, interval time.Duration) *BufferedWriter {
	b := &BufferedWriter{buf: bufio.NewWriterSize(w, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-b.stop:
				return
			case <-t.C:
				b.Flush()
			}
		}
	}()
	return b
}

// Write buffers p, which the log handler hands over one whole line at a time.
func (b *BufferedWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Flush writes out what is buffered.
func (b *BufferedWriter) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Flush()
}

// Close stops the flusher and flushes.
func (b *BufferedWriter) Close() error {
	close(b.stop)
	<-b.done
	return b.Flush()
}
