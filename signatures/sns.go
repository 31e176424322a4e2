package signatures

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// snsScheme verifies Amazon SNS HTTP/S deliveries as AWS's "Verifying the signatures of Amazon
// SNS messages" page and its SDK validators (aws-php-sns-message-validator, sns-validator for
// Node) do: the signature fields are in the JSON body; the string to sign is "Key\nValue\n" for a
// fixed list of fields per message type; SignatureVersion 1 is SHA1withRSA and 2 SHA256withRSA;
// the certificate comes from SigningCertURL, which must be an https URL of a .pem file on
// sns.<region>.amazonaws.com or, as those validators allow, sns.<region>.amazonaws.com.cn (China).
// GovCloud regions match the same pattern. We also verify the certificate's chain, which the SDK
// validators leave to the TLS connection.
//
// Secrets are the allowed topics: full "TopicArn" values, or 12-digit AWS account ids (any topic of that
// account), or "*" for any topic. SNS documents no freshness window and retries a message with
// its original Timestamp, so the timestamp is checked only when the source sets a tolerance.
type snsScheme struct {
	f        *Fetcher
	topics   []string
	anyTopic bool
	tol      time.Duration
}

var snsHost = regexp.MustCompile(`^sns\.[a-z0-9-]{3,}\.amazonaws\.com(\.cn)?$`)

var (
	snsCertPin = pin{name: "SigningCertURL", host: snsHost.MatchString,
		path: func(u *url.URL) bool { return strings.HasSuffix(u.Path, ".pem") && u.RawQuery == "" }}
	snsSubscribePin = pin{name: "SubscribeURL", host: snsHost.MatchString,
		path: func(u *url.URL) bool { return u.Query().Get("Action") == "ConfirmSubscription" }}
)

// snsFields is the signed field order per message type; "Subject?" is signed only if present.
var snsFields = map[string][]string{
	"Notification":             {"Message", "MessageId", "Subject?", "Timestamp", "TopicArn", "Type"},
	"SubscriptionConfirmation": {"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"},
	"UnsubscribeConfirmation":  {"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"},
}

var accountID = regexp.MustCompile(`^[0-9]{12}$`)

func newSNS(cfg Config) (*snsScheme, error) {
	s := &snsScheme{f: fetcherFor(cfg), tol: cfg.Tolerance}
	for i, t := range cfg.Secrets {
		switch {
		case t == "*":
			s.anyTopic = true
		case accountID.MatchString(t), strings.HasPrefix(t, "arn:") && strings.Count(t, ":") == 5:
			s.topics = append(s.topics, t)
		default:
			return nil, fmt.Errorf("%w: secrets[%d]: want a TopicArn, a 12-digit AWS account id or \"*\"", ErrConfig, i)
		}
	}
	return s, nil
}

func (s *snsScheme) topicAllowed(arn string) bool {
	if s.anyTopic || slices.Contains(s.topics, arn) {
		return true
	}
	parts := strings.Split(arn, ":")
	return len(parts) == 6 && parts[0] == "arn" && parts[2] == "sns" && slices.Contains(s.topics, parts[4])
}

// snsMessage is the parsed, verified-to-be-well-formed envelope.
type snsMessage struct {
	typ, version, certURL string
	sig                   []byte
	signed                []byte
	topic, timestamp      string
	subscribeURL          string
}

func parseSNS(h http.Header, body []byte) (*snsMessage, error) {
	if !gjson.ValidBytes(body) {
		return nil, fmt.Errorf("%w: body is not JSON", ErrMalformed)
	}
	// One pass over the top-level object; the first occurrence of a key counts, as gjson's Get
	// would have it.
	top := map[string]gjson.Result{}
	doc := gjson.ParseBytes(body)
	if !doc.IsObject() {
		return nil, fmt.Errorf("%w: body is not a JSON object", ErrMalformed)
	}
	doc.ForEach(func(k, v gjson.Result) bool {
		if _, seen := top[k.Str]; !seen && len(top) < 64 {
			top[k.Str] = v
		}
		return true
	})
	str := func(k string) (string, bool) {
		v := top[k]
		return v.Str, v.Type == gjson.String
	}
	m := &snsMessage{}
	var ok bool
	for _, f := range []struct {
		name string
		dst  *string
	}{{"Type", &m.typ}, {"SignatureVersion", &m.version}, {"SigningCertURL", &m.certURL}} {
		if *f.dst, ok = str(f.name); !ok || *f.dst == "" {
			return nil, fmt.Errorf("%w: body field %s", ErrMissingHeader, f.name)
		}
	}
	raw, ok := str("Signature")
	if !ok || raw == "" {
		return nil, fmt.Errorf("%w: body field Signature", ErrMissingHeader)
	}
	fields, known := snsFields[m.typ]
	if !known {
		return nil, fmt.Errorf("%w: body field Type %q", ErrMalformed, m.typ)
	}
	if ht := headerValue(h, "X-Amz-Sns-Message-Type"); ht != "" && ht != m.typ {
		return nil, fmt.Errorf("%w: x-amz-sns-message-type %q does not match Type %q", ErrMalformed, ht, m.typ)
	}
	if m.version != "1" && m.version != "2" {
		return nil, fmt.Errorf("%w: body field SignatureVersion %q (want 1 or 2)", ErrMalformed, m.version)
	}
	var err error
	if len(raw) > 4096 {
		return nil, fmt.Errorf("%w: body field Signature too long", ErrMalformed)
	}
	if m.sig, err = base64.StdEncoding.DecodeString(raw); err != nil {
		return nil, fmt.Errorf("%w: body field Signature is not base64", ErrMalformed)
	}
	var b strings.Builder
	for _, f := range fields {
		name, optional := strings.CutSuffix(f, "?")
		v, ok := str(name)
		if !ok {
			// An absent or null Subject is not signed (the PHP validator's isset).
			if v, present := top[name]; optional && (!present || v.Type == gjson.Null) {
				continue
			}
			return nil, fmt.Errorf("%w: body field %s", ErrMissingHeader, name)
		}
		b.WriteString(name)
		b.WriteByte('\n')
		b.WriteString(v)
		b.WriteByte('\n')
	}
	m.signed = []byte(b.String())
	m.topic, _ = str("TopicArn")
	m.timestamp, _ = str("Timestamp")
	m.subscribeURL, _ = str("SubscribeURL")
	return m, nil
}

func (s *snsScheme) Verify(r *Request, now time.Time) error {
	_, err := s.verify(r, now)
	return err
}

func (s *snsScheme) verify(r *Request, now time.Time) (*snsMessage, error) {
	m, err := parseSNS(r.Header, r.Body)
	if err != nil {
		return nil, err
	}
	if !s.topicAllowed(m.topic) {
		return nil, fmt.Errorf("%w: TopicArn %q is not an allowed topic", ErrNoMatch, m.topic)
	}
	if s.tol > 0 {
		if err := freshTimestamp(m.timestamp, tsRFC3339, now, s.tol, "body field Timestamp"); err != nil {
			return nil, err
		}
	}
	cert, err := s.f.certificate(m.certURL, snsCertPin, now)
	if err != nil {
		return nil, err
	}
	// As AWS's SDKs do: the certificate must be issued to SNS, not merely chain to a public
	// root from a pinned host.
	if cn := strings.ToLower(cert.Subject.CommonName); cn != "sns.amazonaws.com" && cn != "sns.amazonaws.com.cn" &&
		!(strings.HasPrefix(cn, "sns.") && (strings.HasSuffix(cn, ".amazonaws.com") || strings.HasSuffix(cn, ".amazonaws.com.cn"))) {
		return nil, fmt.Errorf("%w: SigningCertURL certificate is issued to %q, not to SNS", ErrNoMatch, cn)
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: SigningCertURL certificate has no RSA key", ErrNoMatch)
	}
	var sum []byte
	h := crypto.SHA1
	if m.version == "1" {
		d := sha1.Sum(m.signed)
		sum = d[:]
	} else {
		d := sha256.Sum256(m.signed)
		sum, h = d[:], crypto.SHA256
	}
	if rsa.VerifyPKCS1v15(pub, h, sum, m.sig) != nil {
		return nil, fmt.Errorf("%w: body field Signature", ErrNoMatch)
	}
	return m, nil
}

// snsHandshake: a SubscriptionConfirmation is verified like any message, then confirmed by
// GETting its SubscribeURL (pinned to the same SNS hosts). An UnsubscribeConfirmation is
// verified and acknowledged. Neither reaches the ledger. A confirmation GET that fails for
// network reasons is answered 503 so that SNS sends the confirmation again.
func snsHandshake(_ *def, cfg Config, r *Request, now time.Time) (*HandshakeResponse, bool, error) {
	typ := jsonString(r.Body, "Type")
	if typ != "SubscriptionConfirmation" && typ != "UnsubscribeConfirmation" {
		return nil, false, nil
	}
	s, err := newSNS(cfg)
	if err != nil {
		return nil, true, err
	}
	m, err := s.verify(r, now)
	if err != nil {
		return nil, true, err
	}
	if typ == "UnsubscribeConfirmation" {
		return jsonReply(map[string]string{"status": "unsubscribe noted"}), true, nil
	}
	if _, _, err := s.f.get(m.subscribeURL, snsSubscribePin); err != nil {
		if isUnavailable(err) {
			resp := jsonReply(map[string]string{"status": "confirmation failed, retry"})
			resp.Status = http.StatusServiceUnavailable
			resp.Header.Set("Retry-After", "30")
			return resp, true, nil
		}
		return nil, true, err
	}
	return jsonReply(map[string]string{"status": "subscribed"}), true, nil
}
