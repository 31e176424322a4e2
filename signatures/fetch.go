package signatures

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// ErrUnavailable: the request cannot be verified now but may well be authentic, so the gateway
// answers 503 and the provider retries, rather than 401. Either a certificate or key could not be
// fetched (network, timeout, the provider's endpoint failing), or the provider documents that it
// sometimes sends a request unsigned and retries it signed after a 5xx (Vonage).
var ErrUnavailable = errors.New("signatures: cannot be verified now, retry")

// FetcherOptions configures a Fetcher. Zero values take the defaults given.
type FetcherOptions struct {
	// Client makes the requests; its Transport (proxy, dialer, TLS settings) is used as given.
	// Its redirect policy and timeout are replaced: redirects are followed only to hosts of the
	// same pin (at most 3), and each fetch is bounded by Timeout. nil: a client with
	// http.DefaultTransport.
	Client *http.Client
	// Timeout bounds one fetch, connection to last byte. Default 10 s.
	Timeout time.Duration
	// Roots verify the chain of fetched signing certificates. nil: the system roots.
	Roots *x509.CertPool
	// TTL bounds how long a certificate or key is cached (never past a certificate's NotAfter).
	// Default 24 h.
	TTL time.Duration
	// MaxEntries bounds the cache; the entry expiring first is dropped for a new one. Default 256.
	MaxEntries int
	// MaxBytes bounds one response body. Default 64 KiB.
	MaxBytes int64
	// MaxFetches bounds the fetches of certificates and keys not in the
	// cache, per minute, whatever their URL or key id: made-up key ids or
	// certificate URLs, each remembered as refused, would otherwise cost
	// one outbound request each. Past it a verification that needs a
	// fetch is ErrUnavailable (503: the provider retries). Default 60.
	MaxFetches int
}

// Fetcher fetches, verifies and caches the signing certificates (SNS, PayPal) and keys (Plaid)
// of the schemes that look them up at run time. Every URL is checked against the scheme's fixed
// host pin before any connection is made: the hosts are compiled in and no configuration widens
// them, so a request naming any other host is refused without a fetch (no SSRF through a
// certificate URL). Safe for concurrent use; share one across sources.
type Fetcher struct {
	client   *http.Client
	timeout  time.Duration
	roots    *x509.CertPool
	ttl      time.Duration
	max      int
	maxBytes int64

	mu    sync.Mutex
	cache map[string]cacheEntry
	group singleflight.Group
	// maxFetches a minute; fetches counts those since window began.
	maxFetches int
	fetches    int
	window     time.Time
}

type cacheEntry struct {
	val     any // *x509.Certificate, *ecdsa.PublicKey, or error for a remembered refusal
	expires time.Time
}

// NewFetcher builds a Fetcher.
func NewFetcher(o FetcherOptions) *Fetcher {
	f := &Fetcher{client: o.Client, timeout: o.Timeout, roots: o.Roots, ttl: o.TTL, max: o.MaxEntries,
		maxBytes: o.MaxBytes, cache: map[string]cacheEntry{}, maxFetches: o.MaxFetches}
	if f.maxFetches <= 0 {
		f.maxFetches = 60
	}
	if f.client == nil {
		f.client = &http.Client{}
	}
	if f.timeout <= 0 {
		f.timeout = 10 * time.Second
	}
	if f.ttl <= 0 {
		f.ttl = 24 * time.Hour
	}
	if f.max <= 0 {
		f.max = 256
	}
	if f.maxBytes <= 0 {
		f.maxBytes = 64 << 10
	}
	return f
}

func fetcherFor(cfg Config) *Fetcher {
	if cfg.Fetcher != nil {
		return cfg.Fetcher
	}
	return NewFetcher(FetcherOptions{})
}

// pin checks a URL before it is fetched; an error means "never connect there".
type pin struct {
	name string
	host func(host string) bool
	path func(u *url.URL) bool
}

const maxFetchURL = 2048

func (p pin) check(raw string) (*url.URL, error) {
	if len(raw) > maxFetchURL {
		return nil, fmt.Errorf("%w: %s URL longer than %d bytes", ErrMalformed, p.name, maxFetchURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s URL: %v", ErrMalformed, p.name, err)
	}
	if err := p.checkURL(u); err != nil {
		return nil, err
	}
	return u, nil
}

func (p pin) checkURL(u *url.URL) error {
	host := u.Hostname()
	switch {
	case u.Scheme != "https":
		return fmt.Errorf("%w: %s URL must be https", ErrNoMatch, p.name)
	case u.User != nil || u.Opaque != "":
		return fmt.Errorf("%w: %s URL has user info or is opaque", ErrNoMatch, p.name)
	case u.Port() != "" && u.Port() != "443":
		return fmt.Errorf("%w: %s URL has a port other than 443", ErrNoMatch, p.name)
	case host != strings.ToLower(host) || !p.host(host):
		return fmt.Errorf("%w: %s URL host %q is not an allowed host", ErrNoMatch, p.name, host)
	case p.path != nil && !p.path(u):
		return fmt.Errorf("%w: %s URL path %q is not allowed", ErrNoMatch, p.name, u.Path)
	}
	return nil
}

// do performs one pinned request and returns the bounded body of a 200 answer.
func (f *Fetcher) do(req *http.Request, p pin) ([]byte, *tls.ConnectionState, error) {
	if err := p.checkURL(req.URL); err != nil {
		return nil, nil, err
	}
	c := *f.client
	c.Timeout = f.timeout
	c.Jar = nil
	c.CheckRedirect = func(next *http.Request, via []*http.Request) error {
		if len(via) >= 3 {
			return errors.New("too many redirects")
		}
		return p.checkURL(next.URL)
	}
	resp, err := c.Do(req)
	if err != nil {
		if errors.Is(err, ErrNoMatch) {
			return nil, nil, fmt.Errorf("%s redirect refused: %w", p.name, err)
		}
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, p.name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, f.maxBytes+1))
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("%w: %s: reading: %v", ErrUnavailable, p.name, err)
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout &&
		resp.StatusCode != http.StatusTooManyRequests:
		// The provider says there is no such certificate or key: the request is not authentic.
		return nil, nil, fmt.Errorf("%w: %s answered %d", ErrNoMatch, p.name, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return nil, nil, fmt.Errorf("%w: %s answered %d", ErrUnavailable, p.name, resp.StatusCode)
	case int64(len(b)) > f.maxBytes:
		return nil, nil, fmt.Errorf("%w: %s response is larger than %d bytes", ErrMalformed, p.name, f.maxBytes)
	}
	return b, resp.TLS, nil
}

func (f *Fetcher) get(raw string, p pin) ([]byte, *tls.ConnectionState, error) {
	u, err := p.check(raw)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s URL: %v", ErrMalformed, p.name, err)
	}
	return f.do(req, p)
}

func (f *Fetcher) cached(key string, now time.Time) (any, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.cache[key]
	if !ok {
		return nil, false
	}
	if !now.Before(e.expires) {
		delete(f.cache, key)
		return nil, false
	}
	return e.val, true
}

func (f *Fetcher) store(key string, val any, expires time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.cache[key]; !ok && len(f.cache) >= f.max {
		first := ""
		for k, e := range f.cache {
			if first == "" || e.expires.Before(f.cache[first].expires) {
				first = k
			}
		}
		delete(f.cache, first)
	}
	f.cache[key] = cacheEntry{val: val, expires: expires}
}

// load returns the cached value for key or computes it once (concurrent callers share one fetch).
// A refusal (ErrNoMatch) is remembered for negTTL when that is positive, so that made-up key ids
// cannot make every request cost an outbound call.
func (f *Fetcher) load(key string, now time.Time, negTTL time.Duration, fetch func() (any, time.Time, error)) (any, error) {
	if v, ok := f.cached(key, now); ok {
		if err, isErr := v.(error); isErr {
			return nil, err
		}
		return v, nil
	}
	v, err, _ := f.group.Do(key, func() (any, error) {
		if !f.allowFetch(now) {
			return nil, fmt.Errorf("%w: more than %d certificate or key fetches this minute", ErrUnavailable, f.maxFetches)
		}
		v, exp, err := fetch()
		if err != nil {
			if negTTL > 0 && errors.Is(err, ErrNoMatch) {
				f.store(key, err, now.Add(negTTL))
			}
			return nil, err
		}
		f.store(key, v, exp)
		return v, nil
	})
	return v, err
}

// allowFetch counts a fetch against the minute's budget, on the
// verification clock.
func (f *Fetcher) allowFetch(now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now.Sub(f.window) >= time.Minute || now.Before(f.window) {
		f.window, f.fetches = now, 0
	}
	if f.fetches >= f.maxFetches {
		return false
	}
	f.fetches++
	return true
}

// certificate fetches the signing certificate at raw (pinned by p), verifies its chain against
// the roots at time now, and caches it by URL. A refusal (no such certificate, a chain that does
// not verify) is remembered for a minute, so repeating a bad URL does not repeat the fetch.
func (f *Fetcher) certificate(raw string, p pin, now time.Time) (*x509.Certificate, error) {
	if _, err := p.check(raw); err != nil {
		return nil, err
	}
	v, err := f.load("cert "+raw, now, time.Minute, func() (any, time.Time, error) {
		b, state, err := f.get(raw, p)
		if err != nil {
			return nil, time.Time{}, err
		}
		leaf, err := f.verifyChain(b, state, now)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("%w: %s certificate: %v", ErrNoMatch, p.name, err)
		}
		exp := now.Add(f.ttl)
		if leaf.NotAfter.Before(exp) {
			exp = leaf.NotAfter
		}
		return leaf, exp, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*x509.Certificate), nil
}

// verifyChain parses a PEM bundle (leaf first, then any intermediates) and verifies the leaf
// against the roots. Intermediates may also come from the TLS chain of the host that served it,
// since a bundle holding only the leaf is common.
func (f *Fetcher) verifyChain(b []byte, state *tls.ConnectionState, now time.Time) (*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := bytes.TrimSpace(b); len(rest) > 0 && len(certs) < 8; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse: %w", err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if state != nil && len(state.PeerCertificates) > 1 {
		for _, c := range state.PeerCertificates[1:] {
			inter.AddCert(c)
		}
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: f.roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return nil, err
	}
	// As aws-sdk-java-v2's SNS validator does: a certificate restricted to other uses does not sign.
	if ku := certs[0].KeyUsage; ku != 0 && ku&x509.KeyUsageDigitalSignature == 0 {
		return nil, errors.New("certificate key usage excludes digital signatures")
	}
	return certs[0], nil
}

func isUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }
