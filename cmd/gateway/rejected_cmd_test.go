package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/replyonce/gateway/cmd/gateway/internal/server"
)

// `gateway events rejected SOURCE` lists what the instance refused before
// the ledger, newest first, with the signature's value redacted.
func TestEventsRejectedCommand(t *testing.T) {
	agent := newSink(t)
	g := startGateway(t, writeConfig(t, "{kind: memory}", "", agent.srv.URL))
	client := newClient(t)
	for _, id := range []string{"evt_forged_1", "evt_forged_2", "evt_forged_3"} {
		body, header := stripeEvent(t, id, nil)
		header.Set("Stripe-Signature", "t=1,v1=0000forgedsignature0000")
		if r := post(t, client, g.hook("stripe"), body, header); r.status != http.StatusUnauthorized {
			t.Fatalf("forged %s: %d", id, r.status)
		}
	}
	out := runCLI(t, g, "events", "rejected", "stripe")
	if !strings.Contains(out, "3 request(s) refused for stripe") || strings.Count(out, "signature_") != 3 ||
		!strings.Contains(out, "Stripe-Signature: [redacted]") || strings.Contains(out, "forgedsignature") {
		t.Fatalf("events rejected:\n%s", out)
	}
	if i, j := strings.Index(out, "evt_forged_3"), strings.Index(out, "evt_forged_1"); i < 0 || j < 0 || i > j {
		t.Fatalf("not newest first:\n%s", out)
	}
	var js server.RejectedJSON
	if err := json.Unmarshal([]byte(runCLI(t, g, "events", "rejected", "stripe", "--json")), &js); err != nil {
		t.Fatal(err)
	}
	if len(js.Rejected) != 3 || js.Rejected[0].Status != http.StatusUnauthorized || !strings.Contains(string(js.Rejected[0].Body), "evt_forged_3") {
		t.Fatalf("--json: %+v", js)
	}
	if len(js.Rejected[0].Header["Stripe-Signature"]) != 1 || js.Rejected[0].Header["Stripe-Signature"][0] != "[redacted]" {
		t.Fatalf("--json header: %v", js.Rejected[0].Header)
	}
}
