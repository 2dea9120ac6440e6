package spool

import "net/http"

// HeaderDoor marks a stored webhook that an inbound route's door took in
// (its value is the route's name): its signature was checked there, so
// delivery signs it with that route's sign block, and with nothing else.
// Ingest drops the header from whatever any client sends, and only an
// inbound route (or a checked hand-off of a webhook so marked) sets it;
// delivery takes it out before sending (Door).
const HeaderDoor = "Hookpace-Inbound-Route"

// HeaderDoorWebhook and HeaderDoorTarget mark each copy of a webhook that
// a route fanned out to several targets: the door's one id for the
// webhook, shared by its copies, and the target's name. They are set and
// dropped with HeaderDoor, and kept in the journal, where they find a
// copy's siblings.
const (
	HeaderDoorWebhook = "Hookpace-Inbound-Webhook"
	HeaderDoorTarget  = "Hookpace-Inbound-Target"
)

// DoorScope is the dedupe scope of the delivery ids of the route named
// route: no proxy user's scope and no unscoped key spells it (0x02 is a
// control character), so no client of another door can take a delivery
// id before the provider does.
func DoorScope(route string) string { return "\x02inbound\x02" + route }

// Door takes the HeaderDoor mark out of h, in place, and returns the
// route it names; ok false for a webhook no inbound door took in.
func Door(h http.Header) (route string, ok bool) {
	vs, ok := h[HeaderDoor]
	if !ok {
		return "", false
	}
	delete(h, HeaderDoor)
	delete(h, HeaderDoorWebhook)
	delete(h, HeaderDoorTarget)
	if len(vs) != 1 {
		return "", true // marked, but by no one route: signed by none
	}
	return vs[0], true
}
