package signatures

import (
	"fmt"
	"strings"
	"time"
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
	"polar":             "Standard Webhooks (webhook-* headers; key = the secret's UTF-8 bytes, or its base64 decoding after an optional whsec_, as @polar-sh/sdk tries both)",
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

// timestampNotes: the timestamp rules of the schemes that are not described from an hmacDef, or
// whose timestamp is something other than a signed one.
var timestampNotes = map[string]string{
	"discord":    "X-Signature-Timestamp (unix seconds), signed; not checked unless tolerance is set (Discord documents no window and discord-interactions checks none), then refused when further than tolerance from the gateway's clock either way",
	"sendgrid":   "X-Twilio-Email-Event-Webhook-Timestamp (unix seconds), signed; not checked unless tolerance is set (SendGrid documents no window and @sendgrid/eventwebhook checks none), then refused when further than tolerance from the gateway's clock either way",
	"telnyx":     "telnyx-timestamp (unix seconds), signed; refused when more than 300 s before or after the gateway's clock (tolerance changes the window)",
	"mailgun":    "signature.timestamp in the body (unix seconds), signed with the token but not with the event; refused when more than 300 s before or after the gateway's clock (tolerance changes the window)",
	"contentful": "x-contentful-timestamp (unix milliseconds), signed; refused when more than 30 s before or after the gateway's clock (tolerance changes the window; Contentful's toolkit refuses only old ones)",
	"sns":        "Timestamp in the body (RFC 3339), signed; not checked unless tolerance is set (a redelivery keeps its original Timestamp), then refused when further than tolerance from the gateway's clock either way",
	"paypal":     "PAYPAL-TRANSMISSION-TIME (RFC 3339), signed; not checked unless tolerance is set (PayPal documents no window), then refused when further than tolerance from the gateway's clock either way",
	"plaid":      "the JWT's iat claim (unix seconds), signed; refused when more than 300 s before or after the gateway's clock (tolerance changes the window)",
	"vonage":     "the JWT's iat claim (unix seconds), signed; refused when more than 300 s before or after the gateway's clock (tolerance changes the window)",
	"monday":     "the JWT's exp claim, signed and required: refused once expired; no iat window",
	"sentry":     "Sentry-Hook-Timestamp is not covered by the signature, so it is neither checked nor trusted; a replay is caught by its event id",
	"braintree":  "the notification XML's timestamp is signed but not checked (Braintree's SDKs check none); a replay is caught by its event id",
	"plivo":      "none: a nonce is signed instead (X-Plivo-Signature-V3-Nonce) but not remembered; a replay is caught by its event id",
	"hmac":       "as configured: with hmac.timestamp_header, that header (unix seconds, milliseconds or RFC 3339), signed, refused when further than hmac.tolerance (else tolerance, else 300 s) from the gateway's clock either way; without it, none",
}

const noTimestamp = "none: the scheme signs no timestamp, so nothing bounds a request's age; a replay is caught by its event id"

// timestampRule states which timestamp a provider's scheme signs and how the gateway checks it:
// from the hmacDef where there is one, so the words cannot drift from what is verified.
func timestampRule(name string, d *def) string {
	if n, ok := timestampNotes[name]; ok {
		return n
	}
	h := d.hmac
	if h == nil || !h.hasTimestamp() {
		return noTimestamp
	}
	var where string
	switch {
	case h.tsHeader != "":
		where = h.tsHeader
	case h.tsJSON != "":
		where = "body field " + h.tsJSON
	case h.format == fmtKV:
		where = h.tsKey + "= in " + h.headers[0]
	case h.format == fmtTSFirst:
		where = "the first element of " + h.headers[0]
	}
	unit := map[tsFormat]string{tsSeconds: "unix seconds", tsMillis: "unix milliseconds", tsRFC3339: "RFC 3339",
		tsAuto: "unix seconds, unix milliseconds or RFC 3339", tsISOLocal: "ISO 8601, UTC when it has no zone"}[h.tsFormat]
	if h.tolerance == 0 {
		return fmt.Sprintf("%s (%s), signed; not checked unless tolerance is set (the provider's own library checks none), "+
			"then refused when further than tolerance from the gateway's clock either way", where, unit)
	}
	return fmt.Sprintf("%s (%s), signed; refused when more than %s before or after the gateway's clock (tolerance changes the window)",
		where, unit, seconds(h.tolerance))
}

func seconds(d time.Duration) string { return fmt.Sprintf("%d s", int(d/time.Second)) }
