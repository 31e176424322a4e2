package signatures

import (
	"fmt"
	"strings"
)

// One-line descriptions for `gateway providers`. HMAC schemes are described from their table
// entry, so the text cannot drift from what is verified; the others are written here.

var schemeNotes = map[string]string{
	"standard-webhooks": "Standard Webhooks: HMAC-SHA256 (base64) of {id}.{timestamp}.{body}, whsec_ key, webhook-* headers",
	"svix":              "Svix: Standard Webhooks under svix-* headers",
	"replicate":         "Standard Webhooks (webhook-* headers, whsec_ key)",
	"openai":            "Standard Webhooks (webhook-* headers; whsec_ key base64, else its UTF-8 bytes)",
	"resend":            "Standard Webhooks under svix-* headers",
	"clerk":             "Standard Webhooks under svix-* headers",
	"brex":              "Standard Webhooks (webhook-* headers, base64 key)",
	"polar":             "Standard Webhooks (webhook-* headers; key = the secret's UTF-8 bytes, whatever its prefix, as polar-js does)",
	"twilio":            "HMAC-SHA1 (base64) of the public URL + sorted form params, in X-Twilio-Signature; HMAC-SHA256 when X-Twilio-Webhooks-Signature-Settings names HMAC_SHA256 (SharedKey webhooks)",
	"gitlab":            "shared token in X-Gitlab-Token",
	"telegram":          "shared token in X-Telegram-Bot-Api-Secret-Token",
	"okta":              "shared token in Authorization",
	"postmark":          "HTTP basic auth (user:password)",
	"chargebee":         "HTTP basic auth (user:password)",
	"pipedrive":         "HTTP basic auth (user:password)",
	"discord":           "Ed25519 of {timestamp}{body}, hex public key",
	"sendgrid":          "ECDSA P-256 SHA-256 of {timestamp}{body}, base64 DER public key",
	"mailgun":           "HMAC-SHA256 (hex) of timestamp+token inside the body (does not cover the event)",
	"msgraph":           "clientState inside every notification of the body",
	"hmac":              "generic HMAC, configured under hmac:",
	"plivo":             "HMAC-SHA256 (base64) of URL + sorted query and form params + .nonce, X-Plivo-Signature-V3",
	"mandrill":          "HMAC-SHA1 (base64) of the webhook URL + sorted form params, X-Mandrill-Signature",
	"trello":            "HMAC-SHA1 (base64) of {body}{callback URL}, X-Trello-Webhook",
	"contentful":        "HMAC-SHA256 (hex) of method, path, the headers listed in x-contentful-signed-headers and body",
	"sns":               "RSA signature in the body, certificate fetched from a pinned sns.<region>.amazonaws.com URL",
	"paypal":            "RSA-SHA256, certificate fetched from a pinned PayPal URL, over id|time|webhook id|crc32(body)",
	"plaid":             "JWT ES256 in Plaid-Verification, key fetched by kid, body bound by request_body_sha256",
	"vonage":            "JWT HS256 in Authorization, body bound by payload_hash",
	"monday":            "JWT HS256 in Authorization",
	"telnyx":            "Ed25519 of {timestamp}|{body}, base64 public key",
	"adyen":             "HMAC-SHA256 (base64, hex key) of each notification item's fields, inside the body",
	"braintree":         "HMAC-SHA1 of bt_payload with SHA-1(private key), form fields bt_signature/bt_payload",
}

var handshakeNotes = map[string]string{
	"slack": "url_verification challenge", "zoom": "endpoint.url_validation", "meta": "GET hub.challenge",
	"discord": "PING", "twitch": "webhook_callback_verification", "msgraph": "validationToken",
	"dropbox": "GET ?challenge=", "nylas": "GET ?challenge=", "x": "GET crc_token", "asana": "X-Hook-Secret echo",
	"front": "x-front-challenge", "github": "ping event", "intercom": "ping topic",
	"xero": "intent to receive (200 good / 401 bad)", "okta": "GET X-Okta-Verification-Challenge",
	"worldline": "GET X-GCS-Webhooks-Endpoint-Verification", "trello": "HEAD", "mandrill": "HEAD",
	"notion": "verification_token POST", "linkedin": "GET ?challengeCode=", "onfleet": "GET ?check=",
	"buildkite": "ping event", "woocommerce": "webhook_id= ping",
	"sns": "SubscriptionConfirmation", "braintree": "GET ?bt_challenge=", "monday": "challenge echo",
}

func describe(name string, d *def) string {
	if n, ok := schemeNotes[name]; ok {
		return n
	}
	h := d.hmac
	if h == nil {
		return "custom"
	}
	alg := map[int]string{20: "HMAC-SHA1", 32: "HMAC-SHA256", 64: "HMAC-SHA512"}[h.hash().Size()]
	enc := map[sigEnc]string{encHex: "hex", encBase64: "base64", encB64URL: "base64url"}[h.encoding()]
	var b strings.Builder
	for _, p := range h.content {
		switch p.kind {
		case segLit:
			b.WriteString(p.lit)
		case segBody:
			b.WriteString("{body}")
		case segTS:
			b.WriteString("{timestamp}")
		case segID:
			b.WriteString("{id}")
		case segURL:
			b.WriteString("{url}")
		case segMethod:
			b.WriteString("{method}")
		}
	}
	header := h.headers[0]
	if h.numbered {
		header += "N"
	}
	switch h.format {
	case fmtKV:
		header += fmt.Sprintf(" (%s=…%c%s=…)", h.tsKey, h.sep, h.sigKey)
	case fmtTSFirst:
		header += fmt.Sprintf(" (ts%csig…)", h.sep)
	case fmtList:
		header += fmt.Sprintf(" (%s… list)", h.prefix)
	default:
		if h.prefix != "" {
			header += fmt.Sprintf(" (%s…)", strings.TrimSpace(h.prefix))
		}
	}
	key := ""
	switch h.key {
	case keyHex:
		key = ", hex key"
	case keyBase64:
		key = ", base64 key"
	}
	return fmt.Sprintf("%s (%s%s) of %s in %s", alg, enc, key, b.String(), header)
}
