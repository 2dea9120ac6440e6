package admin

import (
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/journal"
	"github.com/hookpace/hookpace/replicate"
	"github.com/hookpace/hookpace/spool"
)

// pageData is what page.html renders. Numbers are formatted here, so that
// the template stays markup.
type pageData struct {
	Now         time.Time
	Query       pageQuery
	Token       string
	Done        string   // what the last action did, from the redirect
	Problems    []string // what could not be read
	Spool       spoolView
	Charts      *chartsView          // nil without a history
	Fleet       *deliver.FleetStatus // nil without a fleet
	Replication *replicate.Status    // nil without spool.replicate
	HTTPS       *HTTPS               // nil without Options.Instance
	Unpaced     []Tunnel             // HTTPS destinations that went around the pacing
	Hosts       []hostView
	Matched     int // hosts that pass the filter
	Known       int // hosts the dispatcher knows
	Pages       int

	SortQueued, SortOldest, SortHost string // links that sort by each column
	Prev, Next                       string // "" on the first / last page
	Back                             string // the query string to come back to after an action
}

type spoolView struct {
	spool.Usage
	MsgFraction, BytesFraction float64
	Bytes, MaxBytes            string
	State                      string // "accepting" or "refusing"
	Why                        string
	OldestAge, OldestHost      string
	JournalText                string // the journal's entries and bytes against its budget
}

func newSpoolView(u spool.Usage, ju journal.Usage, oldest map[string]time.Time, now time.Time) spoolView {
	v := spoolView{Usage: u, Bytes: BytesText(u.Bytes), MaxBytes: BytesText(u.MaxBytes), State: "accepting"}
	v.JournalText = journalText(ju)
	if u.MaxMessages > 0 {
		v.MsgFraction = float64(u.Messages) / float64(u.MaxMessages)
	}
	if u.MaxBytes > 0 {
		v.BytesFraction = float64(u.Bytes) / float64(u.MaxBytes)
	}
	v.Why = u.Why()
	if u.Refusal != spool.RefusalNone {
		v.State = "refusing"
	}
	var first time.Time
	for host, at := range oldest {
		if first.IsZero() || at.Before(first) || (at.Equal(first) && host < v.OldestHost) {
			first, v.OldestHost = at, host
		}
	}
	if !first.IsZero() {
		v.OldestAge = ageText(now.Sub(first))
	}
	return v
}

// hostView is one row of the hosts table. Its fields are flat: the
// template looks each one up by reflection, and a field of an embedded
// struct takes a slow search (5 000 rows: 160 -> 70 ms a render).
type hostView struct {
	Host, ID                   string // ID: for the row's id attribute
	Queued, Dead               int64
	InFlight                   int
	FleetInFlight              string // "" without a fleet-wide count
	Paused                     bool
	PausedWhy                  string // who or what paused the host
	Breaker, LastError         string
	RateText, RateNote         string
	Hold, HoldUntil, HoldTitle string
	OldestAge, LastStatusText  string
	AuthText                   string        // the credentials hookpace attaches, never a secret
	RewriteText                string        // the host's rewrite rules
	ConcurrencyNote            string        // concurrency: auto: the limit and why
	Attention                  bool          // highlighted
	Trend                      template.HTML // the sparkline; "" without a history
}

func (r hostRow) view(now time.Time) hostView {
	v := hostView{Host: r.Host, ID: "h-" + strings.NewReplacer(".", "-", ":", "-").Replace(r.Host),
		Queued: r.Queued, Dead: r.Dead, InFlight: r.InFlight, Paused: r.Paused, Breaker: r.Breaker, LastError: r.LastError}
	v.RateText = RateText(r.Rate) + "/s"
	if r.ConfiguredRate > 0 && r.Rate < r.ConfiguredRate {
		v.RateNote = "of " + RateText(r.ConfiguredRate) + "/s configured"
	} else if r.ConfiguredRate <= 0 {
		v.RateText = "unlimited"
	}
	v.ConcurrencyNote = r.ConcurrencyWhy
	if r.PausedWhy != deliver.PausedByOperator { // an operator knows why
		v.PausedWhy = r.PausedWhy
	}
	for _, note := range []string{r.Learned, r.RateWhy, r.batchText(), r.lanesText()} {
		if note != "" {
			v.RateNote = strings.TrimPrefix(v.RateNote+"; "+note, "; ")
		}
	}
	switch {
	case r.Paused:
		v.Hold = "paused"
	case r.HeldUntil != nil:
		v.Hold = fmt.Sprintf("%s for %s", r.HoldReason, ageText(r.HeldUntil.Sub(now)))
		v.HoldUntil = "until " + r.HeldUntil.UTC().Format("15:04:05") + " UTC"
		v.HoldTitle = r.HeldUntil.UTC().Format(time.RFC3339)
	}
	if !r.Oldest.IsZero() {
		v.OldestAge = ageText(now.Sub(r.Oldest))
	}
	if a := r.Auth; a != nil {
		v.AuthText = "auth: " + strings.ReplaceAll(a.Kinds, ",", ", ")
		if a.TokenExpiry != nil {
			v.AuthText += ", token until " + a.TokenExpiry.UTC().Format("15:04:05") + " UTC"
		}
		if a.LastError != "" {
			v.AuthText += "; last token error: " + a.LastError
		}
	}
	if r.Rewrite != "" {
		v.RewriteText = "rewrite: " + r.Rewrite
	}
	if r.FleetInFlight != nil {
		v.FleetInFlight = strconv.Itoa(*r.FleetInFlight)
	}
	if r.LastStatus != 0 {
		v.LastStatusText = strconv.Itoa(r.LastStatus)
	}
	v.Attention = r.Paused || r.HeldUntil != nil || r.Breaker != "closed" || r.Dead > 0
	return v
}

func (d *pageData) links() {
	q := d.Query
	d.SortQueued = q.url(func(c *pageQuery) { c.Sort, c.Page = "queued", 1 })
	d.SortOldest = q.url(func(c *pageQuery) { c.Sort, c.Page = "oldest", 1 })
	d.SortHost = q.url(func(c *pageQuery) { c.Sort, c.Page = "host", 1 })
	if q.Page > 1 {
		d.Prev = q.url(func(c *pageQuery) { c.Page-- })
	}
	if q.Page < d.Pages {
		d.Next = q.url(func(c *pageQuery) { c.Page++ })
	}
	d.Back = q.values().Encode()
}

// FirstRow and LastRow number the rows shown, from 1.
func (d *pageData) FirstRow() int {
	if len(d.Hosts) == 0 {
		return 0
	}
	return (d.Query.Page-1)*d.Query.Per + 1
}

func (d *pageData) LastRow() int { return (d.Query.Page-1)*d.Query.Per + len(d.Hosts) }

// doneMessage says what the action before the redirect did.
func doneMessage(q url.Values) string {
	done, host := q.Get("done"), q.Get("host")
	if done == "" || host == "" {
		return ""
	}
	if rest, ok := strings.CutPrefix(done, "replayed "); ok {
		n, next, _ := strings.Cut(rest, "; ") // next: what a paused or held host does with them
		if next != "" {
			next = " The host is " + next + "."
		}
		return fmt.Sprintf("%s: %s dead letters put back in the queue.%s", host, n, next)
	}
	if n, ok := strings.CutPrefix(done, "purged "); ok {
		return fmt.Sprintf("%s: %s queued webhooks purged.", host, n)
	}
	switch done {
	case "paused", "resumed":
		return host + ": " + done + "."
	}
	return ""
}

func ageText(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// RateText writes a rate with at most two decimals and no trailing zeros
// (10, 2.5, 0.33): the status page and hookpace status say rates alike.
func RateText(f float64) string {
	s := strconv.FormatFloat(f, 'f', 2, 64)
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

// BytesText writes a size in B, KiB, MiB or GiB, one decimal.
func BytesText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// num groups the digits of an integer in threes: 1,000,000.
func num(n any) string {
	var s string
	switch n := n.(type) {
	case int:
		s = strconv.Itoa(n)
	case int64:
		s = strconv.FormatInt(n, 10)
	default:
		return fmt.Sprint(n)
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func (r hostRow) lanesText() string { return r.Lanes.Text() }

func (r hostRow) batchText() string {
	if r.Batch == nil {
		return ""
	}
	return r.Batch.Text()
}
