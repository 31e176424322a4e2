package ingress

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/replyonce/gateway/ingress/field"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
)

// Replayed content (see ledger's "Content claims" for the protocol).
//
// Where a source's event id comes from a header (or query parameter) the
// provider's signature does not cover, anyone holding a copy of one signed
// request can resend it with a fresh id; without a signed timestamp it
// verifies forever. For such sources the gateway also deduplicates the
// signed content, a SHA-256 of the body (and of the public URL with its
// query, for providers that sign it), beside the event id, for the
// ledger's retention: a request whose content an earlier event id carried
// is answered 200 "duplicate" (outcome "replay") and counted in
// replyonce_replays_refused_total; the same id with the same content is
// the provider's own redelivery and goes the usual way.

// contentLease is how long a content hold keeps other event ids off; the
// event must be recorded in its first half (ledger.ContentClaim.Lease).
const contentLease = 2 * time.Minute

// refuseReplays decides a source's replay refusal: the operator's
// refuse_replays, or on when the event id reads what the signature does
// not cover.
func refuseReplays(cfg SourceConfig, s *Source, path string) (bool, error) {
	if cfg.RefuseReplays != nil {
		if *cfg.RefuseReplays && s.split != "" {
			return false, field.Errorf(path+".refuse_replays", "applies to sources without split: a batch's elements take their ids from the signed body")
		}
		return *cfg.RefuseReplays, nil
	}
	return s.split == "" && idUnsigned(s, cfg.Signature), nil
}

// idUnsigned reports whether the source's event id reads a header the
// provider's signature does not cover, or the query string of a provider
// that does not sign the URL.
func idUnsigned(s *Source, sig signatures.Config) bool {
	headers, query := s.eventID.Reads()
	if query && !s.info.NeedsURL {
		return true
	}
	signed := s.info.SignedHeaders
	if s.Provider == "hmac" && sig.HMAC != nil {
		// The generic scheme signs what its template names.
		if strings.Contains(sig.HMAC.Template, "{id}") {
			signed = append(signed, http.CanonicalHeaderKey(sig.HMAC.IDHeader))
		}
		if strings.Contains(sig.HMAC.Template, "{timestamp}") {
			signed = append(signed, http.CanonicalHeaderKey(sig.HMAC.TimestampHeader))
		}
	}
	for _, h := range headers {
		if !slices.Contains(signed, h) {
			return true
		}
	}
	return false
}

// RefusesReplays reports whether the source refuses replayed content.
func (s *Source) RefusesReplays() bool { return s.replays }

// contentDigest is the SHA-256 of what the signature covers: the body, and
// for providers that sign it the public URL with the query received.
func contentDigest(src *Source, sreq *signatures.Request) string {
	h := sha256.New()
	h.Write([]byte("replyonce content v1\n"))
	if src.info.NeedsURL {
		h.Write([]byte(sreq.URL))
	}
	h.Write([]byte{'\n'})
	h.Write(sreq.Body)
	return hex.EncodeToString(h.Sum(nil))
}

// holdContent claims the request's content for its event id. It answers
// the provider itself (and returns done) when the content is a replay or
// held by another event in flight; otherwise d carries the hold, to be
// kept by the recording (recordCtx) and confirmed after it.
func (g *Gateway) holdContent(c echo.Context, d *delivery, src *Source, sreq *signatures.Request) (done bool, err error) {
	digest := contentDigest(src, sreq)
	ctx, cancel := g.storeCtx(c.Request().Context())
	defer cancel()
	hold, err := g.ledger.ClaimContent(ctx, ledger.ContentClaim{Source: src.Name, Digest: digest, EventID: d.eventID,
		RunID: d.runID, Scope: d.scope, Lease: contentLease})
	if err != nil {
		g.metrics.storeErrors.WithLabelValues(src.Name).Inc()
		d.decision = decStoreError
		return true, &Error{Status: http.StatusServiceUnavailable, Message: "ledger unavailable", Reason: "store", RetryAfter: src.cfg.RetryAfter, Cause: err}
	}
	switch hold.Status {
	case ledger.ContentReplay:
		g.metrics.replays.WithLabelValues(src.Name).Inc()
		d.decision, d.reason = decReplay, "content_of "+clip(hold.By)
		return true, g.ok(c, d, answer{Status: "duplicate", EventID: d.eventID, RunID: d.runID, Outcome: "replay"})
	case ledger.ContentInFlight:
		g.metrics.inFlight.WithLabelValues(src.Name).Inc()
		d.decision, d.reason = decInFlight, "content_of "+clip(hold.By)
		wait := min(max(hold.Until.Sub(g.now()), time.Second), src.cfg.RetryAfter)
		return true, &Error{Status: http.StatusServiceUnavailable, Message: "the same content is being recorded for another event id", Reason: "in_flight", RetryAfter: wait}
	}
	d.digest, d.recordBy = digest, hold.RecordBy
	return false, nil
}

// recordCtx bounds the store call that records a held event by the hold's
// RecordBy (see ledger's "Content claims"); past it, the event is not
// recorded and the provider retries.
func (g *Gateway) recordCtx(ctx context.Context, d *delivery, src *Source) (context.Context, context.CancelFunc, error) {
	if d.recordBy.IsZero() {
		return ctx, func() {}, nil
	}
	if !g.now().Before(d.recordBy) {
		d.decision, d.reason = decStoreError, "content_hold_expired"
		return nil, nil, &Error{Status: http.StatusServiceUnavailable, Message: "the event could not be recorded in time", Reason: "store", RetryAfter: src.cfg.RetryAfter}
	}
	ctx, cancel := context.WithDeadline(ctx, time.Now().Add(d.recordBy.Sub(g.now())))
	return ctx, cancel, nil
}

// confirmContent marks the held content as recorded by the event. A
// failure is logged, not answered: the event is recorded, and a later
// claimant that finds the hold expired finds the event's run (ledger).
func (g *Gateway) confirmContent(ctx context.Context, d *delivery, src *Source) {
	if d.digest == "" || d.recordBy.IsZero() {
		return
	}
	cctx, cancel := g.storeCtx(ctx)
	defer cancel()
	if err := g.ledger.ConfirmContent(cctx, src.Name, d.digest, d.eventID); err != nil {
		g.log.Warn("recording the event's content digest failed; its hold will be read as recorded when it expires",
			zap.String("source", src.Name), zap.String("event_id", d.eventID), zap.Error(err))
	}
}
