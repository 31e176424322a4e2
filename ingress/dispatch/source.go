package dispatch

import (
	"net/http"
	"time"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ledger"
)

// Source is one source as the dispatcher delivers it: its name, its runs
// mode, where its events go and its queue policy, all with their defaults
// filled in. The gateway builds it from the source's configuration
// (ingress.Source.Queued), so the two never hold different settings.
type Source struct {
	Name   string
	Runs   ledger.Mode
	Target forward.Target
	Policy Policy
}

// deliverMargin is added to the forward timeout to make a delivery's
// claim: long enough that a live forward is never taken for dead, short
// enough that a crashed instance's claim frees up soon.
const deliverMargin = 5 * time.Second

// Lease is how long a delivery's claim is held: the forward timeout plus a
// margin, so a live forward is never taken for dead.
func (s *Source) Lease() time.Duration { return s.Target.Timeout + deliverMargin }

// HoldsAhead says whether a dispatcher may hold this source's deliveries
// ahead of a free request place (and make accepts wait for one). Not with
// runs: supersede: a held delivery is in flight as far as the ledger can
// tell, so a newer event could no longer settle it superseded while it
// waits, and the agent would get a turn that newest-wins should drop.
func (s *Source) HoldsAhead() bool { return s.Runs != ledger.ModeSupersede }

// settleMargin is the part of a claim's margin kept for recording a
// forward's outcome: no forward runs past its claim's end minus it.
const settleMargin = deliverMargin / 2

// StartBy is the latest time a delivery whose claim runs out at leaseUntil
// may start its forward: a forward that takes its whole timeout then still
// leaves the settle margin to record its outcome within the claim.
func (s *Source) StartBy(leaseUntil time.Time) time.Time {
	return leaseUntil.Add(-s.Target.Timeout - settleMargin)
}

// ForwardBy is when a forward under a claim that runs out at leaseUntil
// is cut, whatever is left of forward.timeout: its settle must still land
// within the claim, before another process may take the delivery over.
func (s *Source) ForwardBy(leaseUntil time.Time) time.Time {
	return leaseUntil.Add(-settleMargin)
}

// takeBudget bounds the store call that takes a delivery. The claim it
// makes runs out a Lease after the call starts at the earliest, so an
// answer later than this leaves too little of it for a whole forward and
// its settle (StartBy): such a take is abandoned, not waited for.
func (s *Source) takeBudget() time.Duration { return s.Lease() - s.Target.Timeout - settleMargin }

// KeepFor is how long an undelivered event is kept before retention
// starts: as long as its retry policy may go on retrying it.
func (s *Source) KeepFor() time.Duration { return s.Policy.Retry.Lifetime(s.Lease()) }

// ForwardRequest builds the request that delivers a queued event under a
// taken claim: the same request inline mode sends.
func (s *Source) ForwardRequest(ev ledger.QueuedEvent, t ledger.Taken) forward.Request {
	r := s.Target.Request()
	r.Body, r.ContentType, r.Header = ev.Body, ev.ContentType, http.Header(ev.Header)
	r.Source, r.EventID, r.Scope, r.RunID, r.Delivery = s.Name, ev.EventID, t.Item.Scope, t.Run.ID, t.Run.Delivery
	r.FencingToken, r.ContextAt, r.IdempotencyKey = t.Run.Token, t.Run.ContextAt, t.Claim.IdempotencyKey
	r.Final = s.Policy.Retry.Reject
	r.Covers, r.CoverCount = t.Item.Covers, t.Item.CoverCount
	return r
}
