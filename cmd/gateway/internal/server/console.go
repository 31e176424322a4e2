package server

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/replyonce/gateway/cmd/gateway/internal/console"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// NewConsole builds the admin console on the ledger API handler that the
// admin listener serves under /v1/: the console's client calls that very
// handler in process, token and all, so the console, the CLI and any other
// API caller see and do exactly the same things.
//
// hist, when not nil, is this instance's last hour that the overview draws;
// its owner runs it.
func NewConsole(api http.Handler, token string, trustProto bool, sources []*ingress.Source, reg prometheus.Gatherer, hist *console.History, clock func() time.Time, log *zap.Logger) (http.Handler, error) {
	client, err := ledgerapi.NewClient("http://console.internal", token, &http.Client{Transport: inProcess{api}})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(sources))
	for _, s := range sources {
		names = append(names, s.Name)
	}
	return console.New(console.Options{API: client, Token: token, Sources: names, Metrics: reg, Clock: clock, Logger: log,
		TrustForwardedProto: trustProto, Rejected: rejectedFetcher(api, token), History: hist})
}

// inProcess is an http.RoundTripper that serves each request with a
// handler directly, without a socket.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	w := &bufferedResponse{header: http.Header{}}
	t.h.ServeHTTP(w, r)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return &http.Response{Status: strconv.Itoa(w.status) + " " + http.StatusText(w.status), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: w.header, Body: io.NopCloser(&w.body),
		ContentLength: int64(w.body.Len()), Request: r}, nil
}

type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}
