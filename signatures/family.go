package signatures

import "fmt"

// familyRegistry holds the providers of the scheme families added in batch 2 that need
// code of their own: fetched certificates (sns, paypal), JWTs (plaid, vonage, monday), Ed25519 with
// base64 keys (telnyx) and signatures inside the body (adyen, braintree). It is kept apart from
// registry so the two lists can grow independently; lookup and Providers read both, and a name
// may appear in only one (TestRegistryDisjoint).
var familyRegistry = map[string]*def{
	"telnyx": {
		// Follows team-telnyx/telnyx-node src/lib/webhooks.ts: Ed25519 over "{timestamp}|{body}",
		// base64 public key (32 raw bytes) and signature, 300 s either way.
		info: Provider{EventID: []string{"{json:data.id}"}, ContextAt: "{json:data.occurred_at}",
			SignatureHeaders: []string{telnyxSig, telnyxTS}, Timestamped: true, DefaultTolerance: tol5m, BodySigned: true},
		build: wrap(newTelnyxVerifier),
		sign:  wrap(newTelnyxSigner),
	},
	"adyen": {
		// Standard notifications sign eight fields of each item, not the body, so BodySigned is
		// false; banking webhooks (HmacSignature header) sign the whole body. The event id is the
		// first item's; a batch of several items stands as one event unless the source splits it.
		// No "[accepted]" body is needed: since 2024 Adyen accepts any 2xx (Adyen knowledge hub,
		// "webhooks-accept-2xx"), and every 2xx the gateway sends means recorded.
		info: Provider{EventID: []string{"{json:notificationItems.0.NotificationRequestItem.pspReference}:" +
			"{json:notificationItems.0.NotificationRequestItem.eventCode}:{json:notificationItems.0.NotificationRequestItem.success}"},
			ContextAt: "{json:notificationItems.0.NotificationRequestItem.eventDate}"},
		build: wrap(newAdyen),
	},
	"braintree": {
		// Follows braintree/braintree_node lib/braintree/webhook_notification_gateway.js and
		// digest.js. The payload is base64 XML that event id templates cannot read, so the default
		// id is the payload's signature itself: a retry of the same notification repeats it (?).
		info:      Provider{EventID: []string{"{form:bt_signature}"}, BodySigned: true, HandshakeByGET: true},
		build:     wrap(newBraintree),
		handshake: braintreeHandshake,
	},
	"vonage": {
		// The research notes mark the row (?); confirmed on Vonage's Messages API "Signed webhooks"
		// page: a JWT in the Authorization header signed with the signature secret (always
		// SHA-256, i.e. HS256; "Bearer " as Vonage's examples send it), and payload_hash the
		// SHA-256 of the payload (hex, as Vonage's SDK helpers compare it (?)). Several secrets may
		// be configured (the JWT's api_key says which one Vonage used). The iat window of 300 s is
		// ours, Vonage documents none. The event ids are (?).
		// Vonage's page also says an internal error may send a callback unsigned, to be answered
		// with a 5xx so that it is retried signed: a request without Authorization is therefore
		// ErrUnavailable (503), never accepted.
		info: Provider{EventID: []string{"{json:message_uuid}:{json:status}", "{json:message_uuid}", "{json:uuid}:{json:status}", "{json:uuid}"},
			ContextAt: "{json:timestamp}", SignatureHeaders: []string{"Authorization"},
			Timestamped: true, DefaultTolerance: tol5m, BodySigned: true},
		build: wrap(newHS("vonage", "payload_hash", tol5m, true, "Vonage", false)),
	},
	"monday": {
		// Follows monday.com's developer docs ("Authorization header", "Integration
		// authorization"): a JWT in Authorization (without "Bearer"; both accepted) signed with
		// the app's signing secret, or its client secret for webhooks of the authed lifecycle;
		// exp must be present and unexpired, and aud must be the endpoint (checked against url
		// when the source sets it). HS256 is what monday's examples (jsonwebtoken with the secret)
		// produce (?). It does not cover the body, so BodySigned is false. Webhooks created with a
		// personal API key are not signed at all and cannot use this provider.
		// The event id and time fields are the research notes' (?).
		// Since the JWT does not cover the body, its aud is what ties a token to this endpoint:
		// url is required (NeedsURL), so aud is always checked.
		info: Provider{EventID: []string{"{json:event.triggerUuid}"}, ContextAt: "{json:event.triggerTime}",
			SignatureHeaders: []string{"Authorization"}, NeedsURL: true},
		build:     wrap(newHS("monday", "", 0, false, "", true)),
		handshake: mondayHandshake,
	},
	"sns": {
		// See snsScheme. The signature covers Message and its envelope (id, subject, time,
		// topic, type), not MessageAttributes or UnsubscribeURL, so BodySigned is false.
		info: Provider{EventID: []string{"{json:MessageId}"}, ContextAt: "{json:Timestamp}",
			ForwardHeaders: []string{"X-Amz-Sns-Message-Type", "X-Amz-Sns-Message-Id", "X-Amz-Sns-Topic-Arn",
				"X-Amz-Sns-Subscription-Arn"}},
		build:     wrap(newSNS),
		sign:      noSigner("sns"),
		handshake: snsHandshake,
	},
	"paypal": {
		// See paypalScheme. Secrets are webhook ids.
		info: Provider{EventID: []string{"{json:id}"}, ContextAt: "{json:create_time}",
			ForwardHeaders:   []string{paypalID},
			SignatureHeaders: []string{paypalSig, paypalCertURL, paypalAlgo, paypalTime}},
		build: wrap(newPaypal),
		sign:  noSigner("paypal"),
	},
	"plaid": {
		// See plaidScheme. Plaid sends no event id, and the research notes' composite (?) of type, code
		// and item would merge later updates of one item into the first, so there is no default:
		// configure one that suits the webhooks you receive.
		info:  Provider{SignatureHeaders: []string{plaidHeader}, Timestamped: true, DefaultTolerance: tol5m, BodySigned: true},
		build: wrap(newPlaid),
		sign:  noSigner("plaid"),
	},
}

// noSigner: the provider signs with a private key only it holds.
func noSigner(name string) func(Config) (any, error) {
	return func(Config) (any, error) {
		return nil, fmt.Errorf("%w: %s signs with its own private key; there is no signer", ErrConfig, name)
	}
}
