package forward_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/replyonce/gateway/forward"
)

// With KeepBody a 2xx answer comes back whole with its Content-Type; one
// over the limit is still Delivered but not kept; without it only the
// first 256 bytes are.
func TestKeepBody(t *testing.T) {
	_, clock := fixedClock()
	f := newForwarder(t, clock)
	var answer []byte
	status := http.StatusOK
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/xml; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write(answer)
	}))
	defer agent.Close()

	twiml := []byte(`<?xml version="1.0" encoding="UTF-8"?><Response><Message>` + strings.Repeat("ok ", 200) + `</Message></Response>`)
	answer = twiml
	r := baseRequest(agent.URL)
	r.KeepBody = int64(len(twiml))
	out := f.Forward(t.Context(), r)
	if out.Kind != forward.Delivered || !bytes.Equal(out.Body, twiml) || out.ContentType != "text/xml; charset=utf-8" || out.BodyErr != nil {
		t.Fatalf("at the limit: kind %v, %d bytes of %d, type %q, err %v", out.Kind, len(out.Body), len(twiml), out.ContentType, out.BodyErr)
	}

	r.KeepBody = int64(len(twiml)) - 1
	out = f.Forward(t.Context(), r)
	if out.Kind != forward.Delivered || out.Body != nil || !errors.Is(out.BodyErr, forward.ErrAnswerTooLarge) {
		t.Fatalf("one byte over: kind %v, body %d bytes, err %v; want delivered, no body, ErrAnswerTooLarge", out.Kind, len(out.Body), out.BodyErr)
	}

	r.KeepBody = 0
	out = f.Forward(t.Context(), r)
	if out.Body != nil || len(out.Answer) != 256 {
		t.Fatalf("without KeepBody: body %d bytes, answer %d; want none and 256", len(out.Body), len(out.Answer))
	}

	// A failure's body is never kept as an answer to pass on.
	status = http.StatusInternalServerError
	r.KeepBody = 1 << 20
	out = f.Forward(t.Context(), r)
	if out.Kind != forward.Retry || out.Body != nil {
		t.Fatalf("agent 500: kind %v, body %d bytes; want retry and no body", out.Kind, len(out.Body))
	}
}
