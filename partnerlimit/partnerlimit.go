// Package partnerlimit reads what a partner says of its own rate limits in the
// headers of an answer, so that hookpace can slow down before a 429:
//
//   - the IETF fields of draft-ietf-httpapi-ratelimit-headers, structured
//     fields (RFC 9651) parsed with github.com/dunglas/httpsfv:
//     RateLimit-Policy: "default";q=100;w=60 and RateLimit: "default";r=12;t=7
//     (and the draft-07 dictionary RateLimit: limit=100, remaining=12, reset=7);
//   - the draft's older RateLimit-Limit (10, 10;w=1), RateLimit-Remaining and
//     RateLimit-Reset;
//   - the de facto X-RateLimit-Limit, X-RateLimit-Remaining and
//     X-RateLimit-Reset (delta seconds, or a Unix time GitHub-style), and
//     X-RateLimit-Reset-After (Discord-style delta seconds, fractions allowed).
//
// Parse never fails: a malformed value is left out and named in
// Info.Problems, for the caller's log line.
package partnerlimit

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
)

// Header names, canonical (as net/http stores them).
const (
	hRateLimit       = "Ratelimit"
	hPolicy          = "Ratelimit-Policy"
	hLimit           = "Ratelimit-Limit"
	hRemaining       = "Ratelimit-Remaining"
	hReset           = "Ratelimit-Reset"
	hXLimit          = "X-Ratelimit-Limit"
	hXRemaining      = "X-Ratelimit-Remaining"
	hXReset          = "X-Ratelimit-Reset"
	hXResetAfter     = "X-Ratelimit-Reset-After"
	epochThreshold   = 1e9 // a reset above this many seconds is a Unix time (2001-09-09)
	maxQuota         = 1 << 40
	maxWindowSeconds = 366 * 24 * 3600
)

// Info is what one answer says of the partner's limits.
type Info struct {
	// Quota: Remaining more requests are allowed before Reset (from the
	// time passed to Parse); HasReset says whether a reset was given.
	HasQuota  bool
	Remaining int64
	HasReset  bool
	Reset     time.Duration
	QuotaFrom string // the header the quota came from, as sent: "RateLimit", "X-RateLimit-Remaining"...

	// Policy: Limit requests per Window, the strictest of the policies
	// stated (the lowest rate); Burst is the smallest quota of any of them.
	HasPolicy  bool
	Limit      int64
	Window     time.Duration
	Burst      int64
	PolicyFrom string // "RateLimit-Policy", "RateLimit-Limit" or "X-RateLimit-Limit"

	// Problems name the values left out or capped.
	Problems []string
}

// Rate is the policy's requests per second (0 without a policy).
func (i Info) Rate() float64 {
	if !i.HasPolicy || i.Window <= 0 {
		return 0
	}
	return float64(i.Limit) / i.Window.Seconds()
}

// Present reports, cheaply, whether h has any of the headers Parse reads.
func Present(h http.Header) bool {
	for _, k := range [...]string{hRateLimit, hPolicy, hLimit, hRemaining, hXRemaining, hXLimit, hXReset, hXResetAfter, hReset} {
		if len(h[k]) > 0 {
			return true
		}
	}
	return false
}

// Parse reads h at now. A reset beyond maxReset is capped at it, one in
// the past is taken as now; both are named in Problems.
func Parse(h http.Header, now time.Time, maxReset time.Duration) Info {
	var in Info
	p := &parser{now: now, max: maxReset, in: &in}
	switch {
	case len(h[hRateLimit]) > 0:
		p.rateLimit(h[hRateLimit])
	case len(h[hRemaining]) > 0:
		p.quota("RateLimit-Remaining", sfInt(h[hRemaining]), "RateLimit-Reset", h[hReset], sfNumber)
	case len(h[hXRemaining]) > 0:
		if len(h[hXResetAfter]) > 0 {
			p.quota("X-RateLimit-Remaining", plainInt(h[hXRemaining]), "X-RateLimit-Reset-After", h[hXResetAfter], plainNumber)
		} else {
			p.quota("X-RateLimit-Remaining", plainInt(h[hXRemaining]), "X-RateLimit-Reset", h[hXReset], plainNumber)
		}
	}
	switch {
	case len(h[hPolicy]) > 0:
		p.policies("RateLimit-Policy", h[hPolicy])
	case len(h[hLimit]) > 0:
		p.policies("RateLimit-Limit", h[hLimit])
	case len(h[hXLimit]) > 0:
		p.policies("X-RateLimit-Limit", h[hXLimit])
	}
	return in
}

type parser struct {
	now time.Time
	max time.Duration
	in  *Info
}

func (p *parser) problem(format string, args ...any) {
	p.in.Problems = append(p.in.Problems, fmt.Sprintf(format, args...))
}

// rateLimit reads the RateLimit field: a list of "name";r=..;t=.. items,
// the strictest winning, or draft-07's dictionary limit=, remaining=, reset=.
func (p *parser) rateLimit(vals []string) {
	l, err := httpsfv.UnmarshalList(vals)
	if err != nil {
		d, derr := httpsfv.UnmarshalDictionary(vals)
		if derr != nil {
			p.problem("RateLimit %q: %v", clip(vals), err)
			return
		}
		p.quota("RateLimit", dictNumber(d, "remaining"), "RateLimit", nil, nil, dictNumber(d, "reset"))
		return
	}
	found := false
	var bestR int64
	var bestT float64
	for _, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			continue
		}
		r, ok := paramNumber(it.Params, "r")
		if !ok || r < 0 || r != math.Trunc(r) {
			p.problem("RateLimit: member without a valid r")
			continue
		}
		t, hasT := paramNumber(it.Params, "t")
		if hasT && !(t >= 0) {
			p.problem("RateLimit: t=%v is not a time", t)
		}
		if !hasT || !(t >= 0) {
			t = -1
		}
		r = min(r, maxQuota)
		if !found || int64(r) < bestR || (int64(r) == bestR && t > bestT) {
			found, bestR, bestT = true, int64(r), t
		}
	}
	if !found {
		return
	}
	p.in.HasQuota, p.in.Remaining, p.in.QuotaFrom = true, bestR, "RateLimit"
	if bestT >= 0 {
		p.reset("RateLimit", bestT, false)
	}
}

// number is a parsed value: ok false when missing, err set when malformed.
type number struct {
	v   float64
	ok  bool
	err error
}

// quota applies a remaining count and its reset, each parsed by its kind.
func (p *parser) quota(remName string, rem number, resetName string, resetVals []string, parse func([]string) number, pre ...number) {
	if rem.err != nil {
		p.problem("%s: %v", remName, rem.err)
		return
	}
	if !rem.ok {
		return
	}
	if rem.v < 0 || rem.v != math.Trunc(rem.v) {
		p.problem("%s: %v is not a count", remName, rem.v)
		return
	}
	p.in.HasQuota, p.in.Remaining, p.in.QuotaFrom = true, int64(min(rem.v, maxQuota)), remName
	var r number
	switch {
	case len(pre) > 0:
		r = pre[0]
	case len(resetVals) > 0:
		r = parse(resetVals)
	}
	if r.err != nil {
		p.problem("%s: %v", resetName, r.err)
		return
	}
	if r.ok {
		p.reset(resetName, r.v, true)
	}
}

// reset applies a reset in seconds: delta seconds, or a Unix time when
// epochOK and above epochThreshold.
func (p *parser) reset(name string, v float64, epochOK bool) {
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		p.problem("%s: %v is not a time", name, v)
		return
	}
	var d time.Duration
	switch {
	case epochOK && v > epochThreshold:
		if v > float64(math.MaxInt64/int64(time.Second)) {
			d = p.max + 1
			break
		}
		sec, frac := math.Modf(v)
		d = time.Unix(int64(sec), int64(frac*1e9)).Sub(p.now)
		if d < 0 {
			p.problem("%s: %s is in the past", name, strconv.FormatFloat(v, 'f', -1, 64))
			d = 0
		}
	case v > p.max.Seconds():
		d = p.max + 1
	default:
		d = time.Duration(v * float64(time.Second))
	}
	if d > p.max {
		p.problem("%s: %s capped at %s", name, strconv.FormatFloat(v, 'f', -1, 64), p.max)
		d = p.max
	}
	p.in.HasReset, p.in.Reset = true, d
}

// policies reads a list of policies: "name";q=10;w=1 (RateLimit-Policy)
// or 10;w=1 (the older drafts, and X-RateLimit-Limit where sent so). A
// member without a window says no rate and is skipped.
func (p *parser) policies(name string, vals []string) {
	l, err := httpsfv.UnmarshalList(vals)
	if err != nil {
		p.problem("%s %q: %v", name, clip(vals), err)
		return
	}
	for _, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			continue
		}
		q, hasQ := paramNumber(it.Params, "q")
		if !hasQ {
			n, isInt := it.Value.(int64)
			q, hasQ = float64(n), isInt
		}
		w, hasW := paramNumber(it.Params, "w")
		if !hasQ || !hasW {
			continue
		}
		if q < 1 || q != math.Trunc(q) || w <= 0 || w > maxWindowSeconds {
			p.problem("%s: quota %v per %vs is not a limit", name, q, w)
			continue
		}
		q = min(q, maxQuota)
		win := time.Duration(w * float64(time.Second))
		if !p.in.HasPolicy || q/w < float64(p.in.Limit)/p.in.Window.Seconds() {
			p.in.Limit, p.in.Window = int64(q), win
		}
		if !p.in.HasPolicy || int64(q) < p.in.Burst {
			p.in.Burst = int64(q)
		}
		p.in.HasPolicy, p.in.PolicyFrom = true, name
	}
}

func paramNumber(ps *httpsfv.Params, k string) (float64, bool) {
	if ps == nil {
		return 0, false
	}
	v, ok := ps.Get(k)
	if !ok {
		return 0, false
	}
	return toFloat(v)
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func dictNumber(d *httpsfv.Dictionary, k string) number {
	m, ok := d.Get(k)
	if !ok {
		return number{}
	}
	it, ok := m.(httpsfv.Item)
	if !ok {
		return number{err: fmt.Errorf("%s is not a number", k)}
	}
	f, ok := toFloat(it.Value)
	if !ok {
		return number{err: fmt.Errorf("%s is not a number", k)}
	}
	return number{v: f, ok: true}
}

// sfInt reads a structured-field integer (RateLimit-Remaining).
func sfInt(vals []string) number {
	it, err := httpsfv.UnmarshalItem(vals)
	if err != nil {
		return number{err: fmt.Errorf("%q: %w", clip(vals), err)}
	}
	n, ok := it.Value.(int64)
	if !ok {
		return number{err: fmt.Errorf("%q is not an integer", clip(vals))}
	}
	return number{v: float64(n), ok: true}
}

// sfNumber reads a structured-field integer or decimal (RateLimit-Reset).
func sfNumber(vals []string) number {
	it, err := httpsfv.UnmarshalItem(vals)
	if err != nil {
		return number{err: fmt.Errorf("%q: %w", clip(vals), err)}
	}
	f, ok := toFloat(it.Value)
	if !ok {
		return number{err: fmt.Errorf("%q is not a number", clip(vals))}
	}
	return number{v: f, ok: true}
}

// plainInt reads the de facto headers' integer: digits, nothing else.
func plainInt(vals []string) number {
	s := strings.TrimSpace(vals[0])
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || len(vals) > 1 {
		return number{err: fmt.Errorf("%q is not an integer", clip(vals))}
	}
	return number{v: float64(n), ok: true}
}

// plainNumber reads the de facto headers' reset: decimal seconds (a delta
// or a Unix time), or an HTTP-date as some APIs send.
func plainNumber(vals []string) number {
	s := strings.TrimSpace(vals[0])
	if len(vals) == 1 && s != "" && s[0] >= '0' && s[0] <= '9' {
		f, err := strconv.ParseFloat(s, 64)
		if err == nil && !math.IsInf(f, 0) {
			return number{v: f, ok: true}
		}
	}
	if t, err := http.ParseTime(s); err == nil && len(vals) == 1 {
		return number{v: float64(t.Unix()), ok: true}
	}
	return number{err: fmt.Errorf("%q is not a number", clip(vals))}
}

// clip keeps a header's value short for a log line.
func clip(vals []string) string {
	s := strings.Join(vals, ", ")
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
