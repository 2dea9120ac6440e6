package fleet

import (
	"regexp"
	"strconv"
	"testing"
)

// askSlotNames is the local ask.lua reads each of askCall's slots into.
var askSlotNames = map[int]string{
	argNow: "now", argRate: "conf_rate", argCapacity: "cap", argConcurrency: "conc", argWant: "want",
	argLeaseTTL: "lease_ttl", argLeaseBase: "base", argAdaptive: "adaptive", argMinRate: "min_rate",
	argBreakerFailures: "br_failures", argBreakerCooldown: "cooldown", argHoldSchedule: "schedule_arg",
	argMaxRetryAfter: "max_ra", argReleases: "nrel", argAhead: "want_tokens", argGiveBack: "give_back",
	argBurst: "burst", argVersion: "expect", argDebt: "recalled_debt", argDown: "down",
	argSinceDown: "since_down", argLiveLeases: "live_leases", argMark: "mark_name",
	argUnleased: "unleased",
}

// TestAskSlots holds ask.lua's ARGV slots and askCall's together: the
// script reads each fixed slot exactly once, at the top, into the local
// askSlotNames names for askCall's constant, and reads no fixed slot
// anywhere else.
func TestAskSlots(t *testing.T) {
	if len(askSlotNames) != askArgs {
		t.Fatalf("askSlotNames names %d slots, askCall fills %d", len(askSlotNames), askArgs)
	}
	read := map[int]string{}
	top := regexp.MustCompile(`(?m)^local (\w+) = (?:tonumber\()?ARGV\[(\d+)\]`)
	for _, m := range top.FindAllStringSubmatch(askLua, -1) {
		n, _ := strconv.Atoi(m[2])
		if prev, ok := read[n]; ok {
			t.Errorf("ARGV[%d] read into %s and %s", n, prev, m[1])
		}
		read[n] = m[1]
	}
	for slot, name := range askSlotNames {
		if read[slot] != name {
			t.Errorf("ARGV[%d]: ask.lua reads it into %q, askCall fills it as %q", slot, read[slot], name)
		}
	}
	all := regexp.MustCompile(`ARGV\[(\d+)\]`).FindAllStringSubmatch(askLua, -1)
	if len(all) != len(read) {
		t.Errorf("ask.lua reads fixed slots %d times, %d of them at the top: every other use goes by name", len(all), len(read))
	}
	call, _ := (&Limiter{opts: Options{Replica: "r"}}).askCall(Request{Host: "h", Releases: make([]Release, 2)}, memory{})
	if len(call.args) != askArgs+5*2 {
		t.Fatalf("askCall made %d arguments, want %d", len(call.args), askArgs+10)
	}
	for i, a := range call.args[:askArgs] {
		if a == nil {
			t.Errorf("askCall left ARGV[%d] (%s) unset", i+1, askSlotNames[i+1])
		}
	}
}
