package handoff

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// A hand-off carries, besides the webhooks, what the stopping hookpace
// knew of their hosts: a pause (an operator's, or auto_pause_after's) and
// a hold still running (a 429's Retry-After, a used-up quota), until
// when. Without them the other hookpace would deliver a paused partner's
// backlog at once.
//
// They travel on the first webhook handed off for the host, in
// HostHeader, signed with the hand-off secret over the webhook's claim,
// the host and the state (HostSignatureHeader). That webhook goes alone,
// before any other of its host; the others follow only once it was
// answered 202, that is once the other hookpace has recorded the pause
// (durably) and applied the hold: none of them can be delivered there
// before. If it is kept here, the host's other webhooks stay too
// (KeptBehindState). Why not one control request before the webhooks: a
// control request needs an endpoint of its own on the proxy listener, and
// an answer to it says nothing about the webhooks that follow; riding on
// a webhook, the state is applied by the same request that stores it,
// under the same proxy auth and signature, or the webhook is not stored.
// The price: a paused host with nothing queued carries nothing (there is
// nothing to deliver there; in fleet mode the pause is the fleet's
// already).

// HostHeader carries a host's state in a hand-off: a URL-encoded form,
// paused=<who paused it>, held_until=<RFC 3339>, hold=<the hold's reason>.
const HostHeader = "X-Hookpace-Handoff-Host"

// HostSignatureHeader signs HostHeader: "v1=" and 64 hex digits.
const HostSignatureHeader = "X-Hookpace-Handoff-Host-Signature"

// KeptBehindState is why a webhook stays here: the first of its host,
// which carried the host's pause or hold, was kept.
const KeptBehindState = "behind_kept_host_state"

// HostState is what a hand-off tells the other hookpace about one host.
type HostState struct {
	// PausedBy, if set, says the host is paused, and who paused it ("paused
	// by an operator", "auto_pause_after: ...").
	PausedBy string
	// HeldUntil, if not zero, is when a hold (HoldReason) ends.
	HeldUntil  time.Time
	HoldReason string
}

// Empty says the state holds nothing to carry.
func (s HostState) Empty() bool { return s.PausedBy == "" && s.HeldUntil.IsZero() }

// Encode is the HostHeader value.
func (s HostState) Encode() string {
	v := url.Values{}
	if s.PausedBy != "" {
		v.Set("paused", s.PausedBy)
	}
	if !s.HeldUntil.IsZero() {
		v.Set("held_until", s.HeldUntil.UTC().Format(time.RFC3339Nano))
		v.Set("hold", s.HoldReason)
	}
	return v.Encode()
}

// maxHostState bounds a HostHeader value.
const maxHostState = 1024

// ParseHostState reads a HostHeader value.
func ParseHostState(s string) (HostState, error) {
	if len(s) > maxHostState {
		return HostState{}, fmt.Errorf("%s: %d bytes, at most %d", HostHeader, len(s), maxHostState)
	}
	v, err := url.ParseQuery(s)
	if err != nil {
		return HostState{}, fmt.Errorf("%s: %w", HostHeader, err)
	}
	st := HostState{PausedBy: v.Get("paused"), HoldReason: v.Get("hold")}
	if at := v.Get("held_until"); at != "" {
		if st.HeldUntil, err = time.Parse(time.RFC3339Nano, at); err != nil {
			return HostState{}, fmt.Errorf("%s: held_until: %w", HostHeader, err)
		}
	}
	if st.Empty() {
		return HostState{}, errors.New(HostHeader + ": neither paused nor held_until")
	}
	return st, nil
}

// SignHost returns the HostSignatureHeader value for state (the HostHeader
// value) carried by the hand-off with the given claim, for host.
func SignHost(secret []byte, claim, host, state string) string {
	return "v1=" + hexMAC(secret, "hookpace-handoff-host-v1", []string{claim, host}, []byte(state))
}

// VerifyHost checks a HostSignatureHeader value.
func VerifyHost(secret []byte, sig, claim, host, state string) error {
	if sig == "" {
		return errors.New(HostHeader + " without " + HostSignatureHeader)
	}
	if !macEqual(sig, SignHost(secret, claim, host, state)) {
		return errors.New(HostHeader + " whose " + HostSignatureHeader + " does not check (another secret, or a forged claim)")
	}
	return nil
}

// From is the name of the hookpace a claim (the Header value) comes from.
func From(claim string) string {
	if i := strings.LastIndexByte(claim, '/'); i >= 0 {
		return claim[:i]
	}
	return claim
}
