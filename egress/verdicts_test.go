package egress

import (
	"context"
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Verdicts remember admissions, refusals and resolution failures for the
// TTL, and a Reset (a policy change) forgets them.
func TestVerdicts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		var answer error
		ask := func(context.Context, string, uint16) ([]netip.Addr, error) {
			calls++
			return nil, answer
		}
		v := NewVerdicts(time.Minute, 3)
		ctx := context.Background()
		for range 3 {
			if err := v.Check(ctx, "a.example", 443, ask); err != nil {
				t.Fatal(err)
			}
		}
		if calls != 1 {
			t.Fatalf("%d asks for one host, want 1 (remembered)", calls)
		}
		answer = errors.New("dns: no such host")
		v.Check(ctx, "b.example", 443, ask)
		if err := v.Check(ctx, "b.example", 443, ask); err == nil || calls != 2 {
			t.Fatalf("a resolution failure was not remembered (%d asks, want 2; error %v)", calls, err)
		}
		time.Sleep(time.Minute)
		if v.Check(ctx, "b.example", 443, ask); calls != 3 {
			t.Fatalf("a resolution failure outlived its TTL (%d asks, want 3)", calls)
		}
		answer = &DeniedError{Host: "c.example", Reason: "loopback"}
		if err := v.Check(ctx, "c.example", 80, ask); !IsDenied(err) {
			t.Fatalf("refusal not returned: %v", err)
		}
		answer = nil
		if err := v.Check(ctx, "c.example", 80, ask); !IsDenied(err) {
			t.Fatalf("remembered refusal not returned: %v", err)
		}
		v.Reset()
		if err := v.Check(ctx, "c.example", 80, ask); err != nil {
			t.Fatalf("after a reset the new verdict should apply: %v", err)
		}
	})
}

// Known never waits on a resolver beyond its grace: a name whose
// resolver hangs is admitted after the grace, one lookup serves every
// request meanwhile, and its answer, once come, decides the next ones; an
// answer within the grace decides the request that asked; a refusal is
// known at once for the TTL and refreshed before it ends; IP literals
// and localhost are decided at once.
func TestVerdictsKnown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan error)
		var calls atomic.Int32
		hang := func(ctx context.Context, host string, _ uint16) ([]netip.Addr, error) {
			calls.Add(1)
			select {
			case err, ok := <-release:
				if !ok {
					return nil, errors.New("test over")
				}
				return nil, err
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		v := NewVerdicts(5*time.Second, 100)
		defer close(release) // a failed check leaves no lookup hanging
		start := time.Now()
		for range 30 {
			if err := v.Known("slow.example", 443, hang); err != nil {
				t.Fatalf("an unknown name was refused: %v", err)
			}
		}
		if waited := time.Since(start); waited > v.grace {
			t.Fatalf("30 requests to a hanging name waited %v, want at most one grace (%v)", waited, v.grace)
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("%d lookups for one name, want 1", n)
		}
		// The answer comes: a private address. The next request is refused
		// at once, without asking again.
		release <- &DeniedError{Host: "slow.example", Addr: netip.MustParseAddr("10.0.0.1"), Reason: ReasonPrivate}
		synctest.Wait()
		if err := v.Known("slow.example", 443, hang); !IsDenied(err) {
			t.Fatalf("a known refusal was not applied: %v", err)
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("%d lookups, want 1 (the refusal is remembered)", n)
		}
		// Near the TTL's end a request starts a refresh, and is decided by
		// what is known meanwhile.
		time.Sleep(4500 * time.Millisecond)
		if err := v.Known("slow.example", 443, hang); !IsDenied(err) {
			t.Fatalf("a refusal within its TTL was not applied during the refresh: %v", err)
		}
		synctest.Wait()
		if n := calls.Load(); n != 2 {
			t.Fatalf("%d lookups, want a refresh", n)
		}
		release <- nil
		synctest.Wait()
		if err := v.Known("slow.example", 443, hang); err != nil {
			t.Fatalf("the refreshed admission was not applied: %v", err)
		}

		// A name that does not resolve is admitted, remembered as such.
		nx := func(context.Context, string, uint16) ([]netip.Addr, error) {
			calls.Add(1)
			return nil, errors.New("no such host")
		}
		calls.Store(0)
		for range 10 {
			if err := v.Known("nx.example", 80, nx); err != nil {
				t.Fatalf("a name that does not resolve was refused: %v", err)
			}
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("%d lookups of a name that does not resolve, want 1 (negative cache)", n)
		}

		// An answer within the grace decides the request that asked.
		quick := func(_ context.Context, host string, _ uint16) ([]netip.Addr, error) {
			time.Sleep(v.grace / 2)
			return nil, &DeniedError{Host: host, Addr: netip.MustParseAddr("192.168.1.1"), Reason: ReasonPrivate}
		}
		if err := v.Known("lan.example", 80, quick); !IsDenied(err) {
			t.Fatalf("an answer within the grace did not decide: %v", err)
		}

		// IP literals and localhost: asked at once, never in the background.
		g, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range []string{"127.0.0.1", "[::1]", "localhost", "app.localhost", "10.1.2.3"} {
			if err := v.Known(h, 80, g.CheckPort); !IsDenied(err) {
				t.Errorf("%s: %v, want refused at once", h, err)
			}
		}

		// A Reset drops what was known.
		v.Reset()
		calls.Store(0)
		if err := v.Known("slow.example", 443, nx); err != nil || calls.Load() != 1 {
			t.Fatalf("after a reset: %v, %d lookups", err, calls.Load())
		}
		synctest.Wait()
	})
}
