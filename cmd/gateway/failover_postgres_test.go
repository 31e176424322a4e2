//go:build failover

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replyonce/gateway/stores/postgres"
	"github.com/replyonce/gateway/stores/testservers"
)

// postgresRecorded says whether the gateway's table on dsn holds an
// event's scope.
func postgresRecorded(t *testing.T, ctx context.Context, dsn string) func(id string) bool {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := postgres.New(pool, postgres.Options{})
	return func(id string) bool {
		doc, err := s.Read(ctx, "stripe:"+id)
		if err != nil {
			t.Fatal(err)
		}
		return doc != nil
	}
}

// The Postgres server restarts (a fast shutdown, three seconds down, a
// start) while a provider sends queued events: while it is down every
// answer is a 503, the gateway takes events again by itself once it is
// back, and every acknowledged event is delivered.
func TestFailoverPostgresRestart(t *testing.T) {
	pg := testservers.NewPostgres(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dsn := pg.DSN("postgres") + "&connect_timeout=2"
	agent := newCountingAgent(t, 20*time.Millisecond)
	g := startGateway(t, failoverConfig(t, "{kind: postgres, url: '"+dsn+"'}", agent.srv.URL))
	p := startProvider(t, g.hook("stripe"), "evt_pg_restart_", 8)
	p.waitAcked(200)

	if err := pg.Stop(false); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	time.Sleep(3 * time.Second) // the provider keeps sending
	restarting := time.Now()
	if err := pg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	p.waitAcked(200)
	p.finish()

	// Nothing sent while the server was down was acknowledged.
	p.mu.Lock()
	whileDown, acked := 0, 0
	for _, a := range p.answers {
		if a.sent.After(stopped) && a.got.Before(restarting) {
			whileDown++
			if a.status/100 == 2 {
				acked++
			}
		}
	}
	p.mu.Unlock()
	if whileDown == 0 || acked > 0 {
		t.Errorf("while Postgres was down: %d answers, %d of them 2xx; want some, and none 2xx", whileDown, acked)
	}
	o := settle(t, p, agent, 15*time.Second, postgresRecorded(t, ctx, pg.DSN("postgres")))
	back := max(p.downtime(stopped)-started.Sub(stopped), 0)
	t.Logf("postgres restarted: %s; %d answers while it was down, none 2xx; the last refusal came %s after it accepted connections again",
		o, whileDown, back.Round(10*time.Millisecond))
	fmt.Printf("failover: postgres restart (3 s down): %s\n", o)
	if o.lost > 0 {
		t.Errorf("%d acknowledged events were lost (%d of them still in the store)", o.lost, o.stuck)
	}
}

// A primary with a streaming standby and synchronous commit to it; the
// gateway on a multi-host URL that wants a read-write session. The
// primary stops at once (as in a crash), the standby is promoted, and the
// gateway follows by itself (the time it takes is printed; the provider's
// wait for acknowledgements bounds it at a minute), and every acknowledged
// event is delivered.
func TestFailoverPostgresStandby(t *testing.T) {
	primary := testservers.NewPostgres(t, map[string]string{"synchronous_standby_names": "*", "synchronous_commit": "on"})
	standby := testservers.NewStandby(t, primary, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dsn := fmt.Sprintf("postgres://postgres@%s,%s/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		primary.Addr(), standby.Addr())
	agent := newCountingAgent(t, 20*time.Millisecond)
	cfg := failoverConfig(t, "{kind: postgres, url: '"+dsn+"'}", agent.srv.URL)
	var check strings.Builder
	if err := (&App{Stdout: &check, Stderr: io.Discard, LookupEnv: env(nil)}).Run(ctx, []string{"check", "--config", cfg}); err != nil {
		t.Fatal(err)
	}
	t.Logf("gateway check: %s", strings.TrimSpace(check.String()))
	g := startGateway(t, cfg)
	p := startProvider(t, g.hook("stripe"), "evt_pg_standby_", 8)
	p.waitAcked(200)

	if err := primary.Stop(true); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	p.waitAcked(200)
	p.finish()
	followed := max(p.downtime(stopped)-promoted.Sub(stopped), 0)
	o := settle(t, p, agent, 15*time.Second, postgresRecorded(t, ctx, standby.DSN("postgres")))
	t.Logf("postgres primary stopped, standby promoted %s later: %s; the last refusal came %s after the promotion",
		promoted.Sub(stopped).Round(10*time.Millisecond), o, followed.Round(10*time.Millisecond))
	fmt.Printf("failover: postgres primary stopped, standby promoted: %s; gateway following %s after the promotion\n", o, followed.Round(100*time.Millisecond))
	if o.lost > 0 {
		t.Errorf("%d acknowledged events were lost (%d of them still in the store)", o.lost, o.stuck)
	}
}
