// Package signatures authenticates inbound webhooks for the gateway: one verifier (and, where the
// scheme has a shared secret or a private key, one signer) per provider of the registry
// (providers.go, providers_a.go and family.go), a configurable generic HMAC, the providers'
// endpoint handshakes as pure functions, and static facts the ingress uses as defaults (event
// id and context templates, headers safe to forward).
//
// Promises:
//
//   - Fail closed. New never returns a verifier that accepts everything: an unknown provider name,
//     a missing secret, key, URL or verify token is an error at construction. Every Verify error
//     wraps one sentinel saying which check failed (ErrMissingHeader, ErrMalformed, ErrStale,
//     ErrNoMatch, ErrUnsupportedAlgorithm, ErrConfig) and names the header or field; nil is the
//     only "authentic" answer.
//   - Raw bytes. Schemes sign Request.Body exactly as received; nothing is decoded and re-encoded
//     before hashing (form and JSON bodies are parsed only to read values the scheme needs, such as
//     Twilio's POST parameters or Mailgun's signature object).
//   - Constant-time comparison of signatures, tokens and basic-auth credentials. Token compares go
//     through SHA-256 digests first so the secret's length does not leak either.
//   - Timestamps are checked against the now argument, never the wall clock, and are rejected when
//     they are too old or too far in the future (both directions, unlike stripe-go).
//   - Timestamped schemes (Provider.Timestamped) check freshness by default, with the provider's
//     window (Provider.DefaultTolerance, 300 s for most) unless Config.Tolerance is set, also
//     where the provider's own library checks none (Replicate, Customer.io, Webflow). Discord,
//     SendGrid and Sanity sign a timestamp but neither document nor check a window, and SNS and
//     PayPal document none: theirs is checked only when Config.Tolerance is set. Sentry's
//     timestamp header is not signed and so is not checked. Providers whose own SDK rejects only
//     old timestamps (Stripe, Mux, Paddle, HubSpot, Slack's Bolt, Contentful) are checked in both
//     directions here too. Provider.Timestamp states each provider's rule.
//   - No handshake is a signing oracle. A handshake that answers with a MAC under the source's key
//     (X's CRC, LinkedIn's challengeCode, Zoom's plainToken, Braintree's bt_challenge) takes only
//     challenges in the provider's own token form (base64, a UUID, hex), which no content an event
//     signature covers can have, and the verifiers refuse event content of a challenge's form
//     besides (X bodies, Braintree payloads): otherwise anyone could have an event body of their
//     choosing signed by asking the handshake for it. TestNoHandshakeSignsEvents holds every
//     provider with a handshake to this.
//   - Bounded work and no panics on any input: a signature header longer than 8 KiB is malformed,
//     at most 32 signature candidates are read from one header, and secrets are tried in order.
//
// Header names are matched case-insensitively: the canonical key is looked up first, then any
// non-canonical key that equals the name ignoring case (the lexically smallest if there are several,
// so the choice is deterministic). Duplicate header lines: only the first value of a header is
// considered; later lines with the same name are ignored. A sender that needs several signatures
// (rotation) puts them in one header value, as every provider here does. An empty value counts as
// missing.
//
// Request.URL and Config.URL: URL-signing schemes (Twilio, Square, HubSpot v3) sign Request.URL when
// it is set and Config.URL otherwise. The ingress should set Request.URL to the configured public
// URL with the query string of the request actually received, because the query is part of what
// those providers sign and what the query-string handshakes (Meta, Microsoft Graph, Nylas, Dropbox,
// X) read.
//
// Public-key schemes: for Discord, Config.Secrets holds the application public key(s) in hex, and a
// signer takes an Ed25519 private key in hex (the 32-byte seed or the 64-byte private key). For
// SendGrid, Config.Secrets holds the verification key(s) as the dashboard shows them (base64 DER
// SubjectPublicKeyInfo, PEM also accepted), and a signer takes a P-256 private key as base64 DER
// PKCS#8 (PEM also accepted).
//
// Keys: a secret is used as its UTF-8 bytes unless the provider's key is hex (Onfleet), base64
// (Airtable, Microsoft Teams) or whsec_ base64 (the Standard Webhooks family; OpenAI takes other
// secrets as raw bytes, and Polar tries a secret's bytes and then its base64 decoding).
// Request-context schemes (Twilio, Plivo V3, Mandrill, Trello,
// Contentful, HubSpot, Square) sign the public URL, so Config.URL is required for them.
//
// Secrets of the newer families: Telnyx, the base64 Ed25519 public key (a signer takes the base64
// seed); Adyen, the hex HMAC key; Braintree, "public_key:private_key"; Vonage and monday.com, the
// signing secret; SNS, the allowed "TopicArn" values or account ids; PayPal, webhook ids; Plaid,
// "client_id:secret" with an optional "sandbox:" in front.
//
// Fetched keys (sns, paypal, plaid): the certificate or key is fetched at run time through a
// Fetcher, only from the provider's own hosts, which are compiled in (see Fetcher); it is cached
// with a bound and a TTL. A fetch that fails for network reasons wraps ErrUnavailable, which the
// gateway answers with 503 so the provider retries; a URL off the pinned hosts is ErrNoMatch and
// is never requested. The JWT schemes (plaid, vonage, monday) pin their one algorithm.
//
// The registry was first written from research notes on each provider that are not part of
// this repository. Where a fact was seen only in a secondary source and neither the provider's
// docs nor its SDK confirmed it since, the comment at the provider's entry marks it "(?)" and says
// what the verifier follows.
package signatures
