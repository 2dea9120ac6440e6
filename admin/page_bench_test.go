package admin

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/spool"
)

// BenchmarkPage5000Hosts renders a page of 5 000 hosts, every one with a
// backlog in a real spool (so every render reads 5 000 oldest messages)
// and 15 minutes of history.
func BenchmarkPage5000Hosts(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	f.hosts.mu.Lock()
	for i := range 5000 {
		h := fmt.Sprintf("partner-%04d.example", i)
		if err := f.sp.Append(ctx, &spool.Message{Host: h, Method: "POST", URL: "http://" + h + "/",
			Body: make([]byte, 512), Enqueued: f.now.Add(-time.Duration(i) * time.Second)}, 0); err != nil {
			b.Fatal(err)
		}
		f.hosts.hosts = append(f.hosts.hosts, deliver.HostStatus{Host: h, Rate: 10, ConfiguredRate: 10, Breaker: "closed"})
	}
	f.hosts.mu.Unlock()
	hist := fullHistory(f.hosts.Hosts()) // a sparkline in every row
	for _, c := range []struct {
		name, sort string
		hist       *History
	}{{"queued", "queued", hist}, {"oldest", "oldest", hist}, {"queued-no-history", "queued", nil}} {
		sort := c.sort
		b.Run(c.name, func(b *testing.B) {
			f.page.api.History = c.hist
			for b.Loop() {
				resp, err := http.Get(f.srv.URL + "/?per=5000&sort=" + sort)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || n < 5000*1000 {
					b.Fatalf("%s, %d bytes", resp.Status, n)
				}
			}
		})
	}
	if rows, _, _, _ := f.render(b, "?per=5000&sort=oldest"); len(rows) != 5000 || rows[0].attrs["data-host"] != "partner-4999.example" {
		b.Fatalf("%d rows, the first %v", len(rows), rows[0].attrs)
	}
}
