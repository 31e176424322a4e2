package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
)

// certReloader serves the certificate last loaded from the tls section's
// files. A reload that fails keeps the previous certificate: a renewal
// script that writes the key a moment after the cert must not take the
// listener down.
type certReloader struct {
	cert, key string
	current   atomic.Pointer[tls.Certificate]
}

func newCertReloader(c config.TLS) (*certReloader, error) {
	r := &certReloader{cert: c.Cert, key: c.Key}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *certReloader) load() error {
	pair, err := tls.LoadX509KeyPair(r.cert, r.key)
	if err != nil {
		return fmt.Errorf("tls: load %s and %s: %w", r.cert, r.key, err)
	}
	r.current.Store(&pair)
	return nil
}

func (r *certReloader) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.current.Load(), nil
		},
	}
}

// watch reloads on every signal from reload (SIGHUP in production) until
// ctx ends.
func (r *certReloader) watch(ctx context.Context, reload <-chan struct{}, log *zap.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload:
			if err := r.load(); err != nil {
				log.Error("tls: reload failed; keeping the previous certificate", zap.Error(err))
				continue
			}
			log.Info("tls: certificate reloaded", zap.String("cert", r.cert))
		}
	}
}
