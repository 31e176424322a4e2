package main

import (
	"context"
	"io"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/stores/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func statuses(a answer) []string {
	var out []string
	for _, s := range a.Steps {
		out = append(out, s.Tool+"="+s.Status)
	}
	return out
}

func same(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestToolLoop(t *testing.T) {
	backends := map[string]func(t *testing.T) ledgerapi.Ledger{
		"in-process": func(*testing.T) ledgerapi.Ledger {
			return ledgerapi.InProcess(ledger.New(memory.New(nil), ledger.Options{}))
		},
		"ledger-api": func(t *testing.T) ledgerapi.Ledger {
			srv := httptest.NewServer(ledgerapi.NewHandler(ledger.New(memory.New(nil), ledger.Options{}), "tok", nil))
			t.Cleanup(srv.Close)
			c, err := ledgerapi.NewClient(srv.URL, "tok", srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			return ledgerapi.Remote(c)
		},
	}
	for name, newLedger := range backends {
		t.Run(name, func(t *testing.T) {
			rep, err := runDemo(context.Background(), newLedger(t), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := statuses(rep.First), []string{"refund=executed", "refund=replayed", "reply=executed"}; !same(got, want) {
				t.Errorf("m1: the model was told %v, want %v", got, want)
			}
			if len(rep.Shop.Refunds) != 1 {
				t.Errorf("%d refunds issued, want 1 (the retried call must be replayed)", len(rep.Shop.Refunds))
			}
			if got := statuses(rep.Stale); !same(got, []string{"reply=superseded"}) || rep.Stale.Stopped != "superseded" {
				t.Errorf("stale delivery: %v stopped %q, want its reply refused and the loop stopped", got, rep.Stale.Stopped)
			}
			if rep.StaleTurns != 1 {
				t.Errorf("the stale loop asked the model for %d turns after being refused, want 1", rep.StaleTurns)
			}
			if got := statuses(rep.Fresh); !same(got, []string{"reply=executed"}) {
				t.Errorf("redelivery: %v", got)
			}
			want := []string{"We refunded 25.00 for order A-1001.", "Your parcel ships tomorrow."}
			if !same(rep.Shop.Replies, want) {
				t.Errorf("replies sent %q, want %q", rep.Shop.Replies, want)
			}
		})
	}
}
