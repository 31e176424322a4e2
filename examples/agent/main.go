// Command agent is the example agent: it takes the gateway's forwarded chat
// events and replies through the ledger API, once per customer message.
//
//	agent --listen 127.0.0.1:9000 --ledger http://127.0.0.1:8081 --chat http://127.0.0.1:9100
//
// The gateway's admin token comes from --token or GATEWAY_ADMIN_TOKEN, the
// signing secret (the gateway's forward.signing_secret) from
// FORWARD_SIGNING_SECRET. See package agent for what it does and promises.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/replyonce/gateway/examples/agent/agent"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, nil)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// run serves the agent until ctx ends. ready, when set, gets the address it
// listens on.
func run(ctx context.Context, args []string, getenv func(string) string, ready func(addr string)) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9000", "address for the gateway's forwards")
	ledgerURL := fs.String("ledger", "http://127.0.0.1:8081", "the gateway's admin API")
	token := fs.String("token", getenv("GATEWAY_ADMIN_TOKEN"), "admin API bearer token")
	chatURL := fs.String("chat", "http://127.0.0.1:9100", "the chat provider's API")
	budget := fs.Duration("budget", 5*time.Second, "time allowed per event; keep below the gateway's forward timeout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := zap.NewProduction()
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	client, err := ledgerapi.NewClient(*ledgerURL, *token, &http.Client{Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	a, err := agent.New(agent.Config{
		Ledger: ledgerapi.Remote(client), Chat: agent.NewHTTPChat(*chatURL, nil),
		SigningSecret: getenv("FORWARD_SIGNING_SECRET"), Budget: *budget, Logger: log,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Info("agent listening", zap.String("listen", ln.Addr().String()), zap.String("ledger", *ledgerURL))
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case <-ctx.Done():
	case err := <-done:
		return err
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdown)
	if serveErr := <-done; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	return err
}
