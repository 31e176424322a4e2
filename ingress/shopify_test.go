package ingress_test

import (
	"net/http"
	"testing"

	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/signatures"
)

// Shopify's "events" deliveries (@shopify/shopify-api's WebhookType.Events) carry Shopify-*
// headers and no event id header: their Shopify-Webhook-Id is the event id, and the
// informative headers reach the agent.
func TestShopifyEventsDeliveriesFindTheirID(t *testing.T) {
	const secret = "shpss_events_secret"
	h := newHarness(t, ingress.SourceConfig{Name: "shopify", Provider: "shopify", Signature: signatures.Config{Secrets: []string{secret}}})
	hdr := http.Header{"Content-Type": {"application/json"}, "Shopify-Topic": {"orders/create"}, "Shopify-Shop-Domain": {"a.myshopify.com"},
		"Shopify-Api-Version": {"2026-01"}, "Shopify-Webhook-Id": {"b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"},
		"Shopify-Handle": {"orders"}, "Shopify-Action": {"create"}, "Shopify-Triggered-At": {"2026-03-14T15:09:26Z"}}
	body := []byte(`{"id":820982911946154508,"email":"jon@example.com"}`)
	r := &signatures.Request{Method: http.MethodPost, Header: hdr, Body: body}
	// Shopify signs the events with the same HMAC under the newer header name.
	s, _ := signatures.NewSigner("shopify", signatures.Config{Secrets: []string{secret}})
	if err := s.Sign(r, h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	hdr.Set("Shopify-Hmac-Sha256", hdr.Get("X-Shopify-Hmac-Sha256"))
	hdr.Del("X-Shopify-Hmac-Sha256")
	if rep := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/shopify", hdr, body)); rep.Status != http.StatusOK {
		t.Fatalf("events delivery: %s", rep)
	}
	if n := h.sink.count("b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"); n != 1 {
		t.Fatalf("forwards under the webhook id: %d", n)
	}
}
