package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"sync/atomic"
	"time"

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
	// seen is what the two files looked like at the last load attempt,
	// so a timed check reloads only after a change, and reports a broken
	// pair once rather than on every check.
	seen [2]fileStamp
}

// fileStamp is what a timed check compares: a renewal rewrites the file,
// which changes its modification time, its size, or both.
type fileStamp struct {
	mod  time.Time
	size int64
	err  bool
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{err: true}
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size()}
}

func newCertReloader(c config.TLS) (*certReloader, error) {
	r := &certReloader{cert: c.Cert, key: c.Key}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *certReloader) load() error {
	r.seen = [2]fileStamp{stampOf(r.cert), stampOf(r.key)}
	pair, err := tls.LoadX509KeyPair(r.cert, r.key)
	if err != nil {
		return fmt.Errorf("tls: load %s and %s: %w", r.cert, r.key, err)
	}
	r.current.Store(&pair)
	return nil
}

// changed reports whether either file differs from the last load attempt.
func (r *certReloader) changed() bool {
	return r.seen != [2]fileStamp{stampOf(r.cert), stampOf(r.key)}
}

func (r *certReloader) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.current.Load(), nil
		},
	}
}

// watch reloads on every signal from reload (SIGHUP in production), and on
// every tick of check when the files changed (Windows, or tls.check_every),
// until ctx ends. Either channel may be nil. checked, when set, is called
// after each tick of check has been handled.
func (r *certReloader) watch(ctx context.Context, reload <-chan struct{}, check <-chan time.Time, checked func(), log *zap.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload:
			r.reload(log)
		case <-check:
			if r.changed() {
				r.reload(log)
			}
			if checked != nil {
				checked()
			}
		}
	}
}

func (r *certReloader) reload(log *zap.Logger) {
	if err := r.load(); err != nil {
		log.Error("tls: reload failed; keeping the previous certificate", zap.Error(err))
		return
	}
	log.Info("tls: certificate reloaded", zap.String("cert", r.cert))
}
