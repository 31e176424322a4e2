package ledger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/memory"
)

// The length the ledger predicts for a JSON string is the one
// encoding/json writes, escapes included.
func TestJSONStringLenIsEncodingJSONs(t *testing.T) {
	pieces := []string{"a", "Z", " ", "\"", "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x01", "\x1f", "\x7f",
		"<", ">", "&", "é", "€", "\u2028", "\u2029", "\u2027", "\u202a", "😀", "\xe2\x80"}
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		var b strings.Builder
		for range rnd.IntN(40) {
			b.WriteString(pieces[rnd.IntN(len(pieces))])
		}
		s := b.String()
		if i == 0 {
			s = ""
		}
		raw := []byte(s)
		if !utf8.Valid(raw) {
			continue
		}
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := ledger.JSONStringLen(raw) + 2; got != len(want) {
			t.Fatalf("%q: predicted %d bytes, encoding/json wrote %d (%s)", s, got, len(want), want)
		}
	}
}

// An event record rides in its item in whichever form is shorter: a text
// body as a JSON string, a body of control bytes as base64 (as a string it
// would be six times its size), and either comes back byte for byte.
func TestEmbeddedEventTakesTheShorterForm(t *testing.T) {
	ctx := context.Background()
	enqueue := func(l *ledger.Ledger, body []byte) (ledger.Enqueued, error) {
		return l.Queue().Enqueue(ctx, ledger.EnqueueRequest{
			Event: ledger.QueuedEvent{Source: "src", EventID: "e1", Scope: "conv", Body: body},
			Run:   ledger.RunOptions{RunID: "src:e1", Mode: ledger.ModeIndependent},
			Claim: ledger.ClaimRequest{Key: ledger.Key{Scope: "conv", Intent: "deliver", Payload: "e1"}, PendingTTL: time.Minute},
		})
	}
	for _, tc := range []struct {
		name   string
		body   []byte
		asText bool
	}{
		{"json", []byte(`{"type":"message","text":"hello there","n":[1,2,3]}` + strings.Repeat(" ", 900)), true},
		{"zeros", make([]byte, 1024), false},
		{"form", bytes.Repeat([]byte("a=1&"), 256), false},
		{"binary", []byte{0xff, 0xfe, 0x00, 0x01}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := memory.New(time.Now)
			l := ledger.New(store, ledger.Options{})
			q, err := enqueue(l, tc.body)
			if err != nil || q.Status != ledger.EnqueueQueued {
				t.Fatalf("enqueue: %v %v", q.Status, err)
			}
			if (q.Item.EventText != "") != tc.asText || (q.Item.Event != nil) == tc.asText {
				t.Fatalf("item carries text %d bytes, base64 %d bytes; want text %v", len(q.Item.EventText), len(q.Item.Event), tc.asText)
			}
			raw, err := store.Read(ctx, "conv")
			if err != nil {
				t.Fatal(err)
			}
			// The same document without a body, for what the body adds.
			bare := memory.New(time.Now)
			if _, err := enqueue(ledger.New(bare, ledger.Options{}), nil); err != nil {
				t.Fatal(err)
			}
			rawBare, err := bare.Read(ctx, "conv")
			if err != nil {
				t.Fatal(err)
			}
			if grow, most := len(raw)-len(rawBare), len(tc.body)*4/3+400; grow > most {
				t.Fatalf("a %d-byte body made the document %d bytes larger, more than %d", len(tc.body), grow, most)
			}
			// Read back from the store, not from the answer.
			items, err := l.Queue().QueueItems(ctx, "conv")
			if err != nil || len(items) != 1 {
				t.Fatalf("items: %v %d", err, len(items))
			}
			ev, err := l.Queue().QueuedEventOf(ctx, items[0])
			if err != nil || !bytes.Equal(ev.Body, tc.body) {
				t.Fatalf("body back: %v, equal %v", err, bytes.Equal(ev.Body, tc.body))
			}
		})
	}
}
