package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/ledger"
)

// downStore fails every call the way a Postgres that went away does, with
// an error naming the user, database and address.
type downStore struct{ ledger.Store }

var errDown = errors.New(`failed to connect to user=gateway database=ledger host=10.1.2.3:5432: connection refused`)

func (downStore) Transact(context.Context, string, func([]byte) (*ledger.Write, error)) error {
	return errDown
}
func (downStore) Read(context.Context, string) ([]byte, error) { return nil, errDown }
func (downStore) ScopesToReview(context.Context, time.Time, int) ([]string, error) {
	return nil, errDown
}

// /readyz needs no token, so with the store down it says only that, and
// the detail goes to the log.
func TestReadyzRevealsNothingAboutTheStore(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	s, err := New(Options{Store: downStore{}, Admin: config.Admin{Listen: "127.0.0.1:0", Token: "secret-token"}, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := httptest.NewRecorder()
	s.Admin.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d %s, want 503", rec.Code, body)
	}
	for _, secret := range []string{"gateway", "ledger", "10.1.2.3", "5432", "user=", "refused"} {
		if strings.Contains(string(body), secret) {
			t.Errorf("/readyz body %q reveals %q", body, secret)
		}
	}
	found := false
	for _, e := range logs.All() {
		if strings.Contains(fmt.Sprint(e.ContextMap()["error"]), "10.1.2.3:5432") {
			found = true
		}
	}
	if !found {
		t.Errorf("the store's error was not logged: %v", logs.All())
	}
}
