package forward

import "time"

// Target is where one source's events go and how: the agent's URL, the
// timeout of each request, the source's static headers and its Standard
// Webhooks signing secret. Its YAML tags are the keys of a gateway
// source's forward section; the gateway's inline path and its dispatcher
// both send with it.
type Target struct {
	URL           string            `yaml:"url"`
	Timeout       time.Duration     `yaml:"timeout"` // <= 0: DefaultTimeout
	Headers       map[string]string `yaml:"headers"`
	SigningSecret string            `yaml:"signing_secret"`
}

// Request is a request to t with nothing of an event in it yet: the
// caller fills in the body and the event's identity.
func (t Target) Request() Request {
	return Request{URL: t.URL, Timeout: t.Timeout, StaticHeaders: t.Headers, SigningSecret: t.SigningSecret}
}
