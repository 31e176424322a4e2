package signatures

import (
	"errors"
	"strconv"
	"testing"
)

// The Linear signer puts the signing time into a body that lacks webhookTimestamp, so that a test
// event verifies, and leaves a body that has it, or is not an object, as it is.
func TestLinearSignerAddsBodyTimestamp(t *testing.T) {
	ms := strconv.FormatInt(t0.UnixMilli(), 10)
	for _, c := range []struct{ body, want string }{
		{`{"id":"evt_1"}`, `{"webhookTimestamp":` + ms + `,"id":"evt_1"}`},
		{` { }`, `{"webhookTimestamp":` + ms + `}`},
		{`{"webhookTimestamp":1,"id":"x"}`, `{"webhookTimestamp":1,"id":"x"}`},
		{`[1,2]`, `[1,2]`},
		{`{"broken":`, `{"broken":`},
	} {
		s, err := NewSigner("linear", Config{Secrets: []string{"k"}})
		if err != nil {
			t.Fatal(err)
		}
		r := &Request{Method: "POST", Body: []byte(c.body)}
		if err := s.Sign(r, t0); err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		if string(r.Body) != c.want {
			t.Errorf("body %s signed as %s, want %s", c.body, r.Body, c.want)
		}
	}
	s, _ := NewSigner("linear", Config{Secrets: []string{"k"}})
	r := &Request{Method: "POST", Body: []byte(`{"id":"evt_1"}`)}
	_ = s.Sign(r, t0)
	if err := verify(t, "linear", Config{Secrets: []string{"k"}}, r, t0); err != nil {
		t.Fatalf("signed event without a timestamp of its own: %v", err)
	}
}

// The Braintree signer refuses a body the verifier would refuse, instead of signing it.
func TestBraintreeSignerNeedsXML(t *testing.T) {
	s, err := NewSigner("braintree", Config{Secrets: []string{"pub:priv"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sign(&Request{Body: []byte(`{"id":"x"}`)}, t0); !errors.Is(err, ErrMalformed) {
		t.Fatalf("JSON body: %v, want ErrMalformed", err)
	}
	if err := s.Sign(&Request{Body: []byte(`<notification/>`)}, t0); err != nil {
		t.Fatalf("XML body: %v", err)
	}
}
