package admin

// POST /v1/dead/replay: dead letters back at the tail of their hosts'
// queues, and for each host, what will happen to them next. A replayed
// webhook's max_age counts from the replay, paused or held host or not:
// one still queued max_age after the replay dies again.

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/spool"
)

// Replayed is the answer to a replay: how many dead letters went back,
// and what each of their hosts will do with them.
type Replayed struct {
	Replayed int            `json:"replayed"`
	Hosts    []ReplayedHost `json:"hosts,omitempty"`
}

// ReplayedHost is one host's state as the replay found it.
type ReplayedHost struct {
	Host      string     `json:"host"`
	Paused    bool       `json:"paused,omitempty"`
	HeldUntil *time.Time `json:"held_until,omitempty"`
	// DieAt is the replay's time plus the host's max_age: a replayed
	// webhook still queued then dies again. Absent without a max_age.
	DieAt *time.Time `json:"die_at,omitempty"`
	// Next says in words what happens to the host's replayed webhooks.
	Next string `json:"next"`
}

func (a *api) replayDead(w http.ResponseWriter, r *http.Request) {
	a.bulk(w, r, "replayed", func(f spool.DeadFilter) (int, any, error) {
		hosts, err := a.deadHosts(f)
		if err != nil {
			return 0, nil, err
		}
		n, err := a.Spool.ReplayDead(f)
		out := Replayed{Replayed: n}
		if n == 0 {
			return n, out, err
		}
		now := time.Now()
		for _, h := range hosts {
			st, _ := a.Hosts.Host(h)
			out.Hosts = append(out.Hosts, replayedHost(h, st, now, "this replay"))
		}
		return n, out, err
	})
}

// deadHosts names the hosts of the dead letters f selects, sorted.
func (a *api) deadHosts(f spool.DeadFilter) ([]string, error) {
	if f.Host != "" {
		return []string{f.Host}, nil
	}
	var hosts []string
	if len(f.IDs) > 0 {
		found, _, err := a.Spool.ListDead(f, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range found {
			hosts = append(hosts, d.Message.Host)
		}
	} else {
		byHost, err := a.Spool.DeadByHost()
		if err != nil {
			return nil, err
		}
		for h, n := range byHost {
			if n > 0 {
				hosts = append(hosts, h)
			}
		}
	}
	slices.Sort(hosts)
	return slices.Compact(hosts), nil
}

// replayedHost says what host, in state st (zero for a host the
// dispatcher does not know: neither paused nor held), will do with
// webhooks queued again at now by what ("this replay").
func replayedHost(host string, st deliver.HostStatus, now time.Time, what string) ReplayedHost {
	rh := ReplayedHost{Host: host, Paused: st.Paused, HeldUntil: st.HeldUntil}
	var die time.Time
	if st.MaxAge > 0 {
		die = now.Add(st.MaxAge).UTC()
		rh.DieAt = &die
	}
	switch {
	case st.Paused:
		rh.Next = fmt.Sprintf("paused: they wait until it is resumed (hookpace resume %s)", host)
	case st.HeldUntil != nil:
		rh.Next = fmt.Sprintf("held until %s: they wait until then", st.HeldUntil.Local().Format(time.TimeOnly))
	default:
		rh.Next = "sent as its pace allows"
	}
	switch {
	case die.IsZero():
	case st.Paused:
		rh.Next += fmt.Sprintf("; max_age %v counts from %s: those still queued at %s die again", st.MaxAge, what,
			die.Local().Format(time.TimeOnly))
	case st.HeldUntil != nil && !st.HeldUntil.Before(die):
		rh.Next += fmt.Sprintf("; max_age %v, counted from %s, ends first (at %s): they die again unless the hold ends sooner",
			st.MaxAge, what, die.Local().Format(time.TimeOnly))
	default:
		rh.Next += fmt.Sprintf("; max_age %v counts from %s", st.MaxAge, what)
	}
	return rh
}

// queuedAgainNote says what host, in state st, will do with webhooks
// queued again now by what ("this resend"): "" when it is neither paused
// nor held.
func queuedAgainNote(host string, st deliver.HostStatus, now time.Time, what string) string {
	if !st.Paused && st.HeldUntil == nil {
		return ""
	}
	return replayedHost(host, st, now, what).Next
}

// ReplayDead moves dead letters back into their queues, and says what
// their hosts will do with them.
func (c *Client) ReplayDead(ctx context.Context, s Selector) (Replayed, error) {
	var out Replayed
	err := c.do(ctx, http.MethodPost, "/v1/dead/replay", s.query(), &out)
	return out, err
}
