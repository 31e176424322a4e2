package ingress

import (
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Rejected requests: the last RejectedKept requests per source that were
// refused before the ledger (a bad signature, a body over max_body, a
// method other than POST, no event id), kept in this process's memory
// only. Unauthenticated traffic must never write to the store, so each
// instance keeps its own; a person looking for why a provider's requests
// fail (a wrong secret, say) sees what arrived, with credentials redacted.

// RejectedKept is how many refused requests each source keeps.
const RejectedKept = 100

// RejectedBodyKept is how much of a refused request's body is kept.
const RejectedBodyKept = 2 << 10

// rejectedHeaderKept bounds what a refused request's headers may cost:
// at most this many values, each clipped to rejectedValueKept bytes.
const (
	rejectedHeaderKept = 64
	rejectedValueKept  = 256
)

// Rejected is one refused request as this instance saw it.
type Rejected struct {
	At     time.Time   `json:"at"`
	Source string      `json:"source"`
	Status int         `json:"status"`
	Reason string      `json:"reason"` // signature_no_match, too_large, method, missing_event_id, ...
	Remote string      `json:"remote"`
	Method string      `json:"method"`
	Header http.Header `json:"header"` // signature and credential values redacted
	// Body is the start of the body (RejectedBodyKept bytes); BodySize
	// is the size read, or the Content-Length given when it was not read.
	Body      []byte `json:"body"`
	BodySize  int64  `json:"body_size"`
	Truncated bool   `json:"truncated,omitempty"`
}

// rejectedLog keeps a ring of refused requests per source.
type rejectedLog struct {
	mu  sync.Mutex
	per map[string]*rejectedRing
}

type rejectedRing struct {
	items [RejectedKept]Rejected
	next  int // where the next one goes
	n     int // how many are kept
}

func newRejectedLog() *rejectedLog { return &rejectedLog{per: map[string]*rejectedRing{}} }

func (l *rejectedLog) add(r Rejected) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ring := l.per[r.Source]
	if ring == nil {
		ring = &rejectedRing{}
		l.per[r.Source] = ring
	}
	ring.items[ring.next] = r
	ring.next = (ring.next + 1) % RejectedKept
	ring.n = min(ring.n+1, RejectedKept)
}

// list returns the source's kept requests, newest first.
func (l *rejectedLog) list(source string) []Rejected {
	l.mu.Lock()
	defer l.mu.Unlock()
	ring := l.per[source]
	if ring == nil {
		return []Rejected{}
	}
	out := make([]Rejected, 0, ring.n)
	for i := 1; i <= ring.n; i++ {
		out = append(out, ring.items[(ring.next-i+RejectedKept)%RejectedKept])
	}
	return out
}

// RejectedRequests returns the last RejectedKept requests this instance
// refused for source before the ledger, newest first. Other instances
// keep their own.
func (g *Gateway) RejectedRequests(source string) []Rejected { return g.rejected.list(source) }

// rejectedDecisions are the refusals made before the ledger was asked
// anything: what unauthenticated or malformed traffic gets.
var rejectedDecisions = map[decision]bool{decMethod: true, decBody: true, decUnauthorized: true, decNoEventID: true, decBadEventID: true}

// keepRejected records a refused request of a configured source.
func (g *Gateway) keepRejected(r *http.Request, d *delivery, status int, reason string) {
	if d.source == nil || !rejectedDecisions[d.decision] {
		return
	}
	rec := Rejected{At: g.now(), Source: d.source.Name, Status: status, Reason: reason, Remote: r.RemoteAddr, Method: r.Method,
		Header: redactHeader(r.Header), BodySize: int64(len(d.body))}
	if d.body == nil && r.ContentLength > 0 {
		rec.BodySize = r.ContentLength
	}
	if len(d.body) > RejectedBodyKept {
		rec.Body, rec.Truncated = append([]byte(nil), d.body[:RejectedBodyKept]...), true
	} else {
		rec.Body = append([]byte(nil), d.body...)
	}
	g.rejected.add(rec)
}

// credentialWords mark a header whose value is a signature or a
// credential: its value is never kept, only its length.
var credentialWords = []string{"signature", "sig", "auth", "token", "secret", "key", "cookie", "hmac", "password", "credential", "hash"}

// Redacted is what a redacted header value reads.
const Redacted = "[redacted]"

func redactHeader(h http.Header) http.Header {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make(http.Header, len(names))
	kept := 0
	for _, k := range names {
		lower := strings.ToLower(k)
		secret := false
		for _, w := range credentialWords {
			if strings.Contains(lower, w) {
				secret = true
				break
			}
		}
		for _, v := range h[k] {
			if kept == rejectedHeaderKept {
				return out
			}
			kept++
			switch {
			case secret:
				v = Redacted
			case len(v) > rejectedValueKept:
				v = strings.ToValidUTF8(v[:rejectedValueKept], "") + "…"
			}
			out[k] = append(out[k], v)
		}
	}
	return out
}
