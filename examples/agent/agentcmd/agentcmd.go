// Package agentcmd is the example agent's command line (examples/agent),
// importable so tests elsewhere (cmd/gateway's quickstart test) can run the
// agent in-process exactly as `go run ./examples/agent` does.
package agentcmd

import (
	"context"
	"errors"
	"flag"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/replyonce/gateway/examples/agent/agent"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// Builtin is the --chat value that runs the demo chat in-process.
const Builtin = "builtin"

// Addrs says where a running agent is.
type Addrs struct {
	Listen string // the agent's listener: the gateway's forward.url points here
	Chat   string // the chat API the agent uses (the demo chat's URL with --chat builtin)
}

// Run serves the agent until ctx ends. ready, when set, gets its addresses
// once it listens.
func Run(ctx context.Context, args []string, getenv func(string) string, ready func(Addrs)) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9000", "address for the gateway's forwards")
	ledgerURL := fs.String("ledger", "http://127.0.0.1:8081", "the gateway's admin API")
	token := fs.String("token", getenv("GATEWAY_ADMIN_TOKEN"), "admin API bearer token (default $GATEWAY_ADMIN_TOKEN)")
	chatURL := fs.String("chat", Builtin, `the chat provider's API, or "builtin": a demo chat in this process, for local trials only`)
	secret := fs.String("signing-secret", getenv("FORWARD_SIGNING_SECRET"),
		"the gateway's forward.signing_secret (default $FORWARD_SIGNING_SECRET; use the variable for real secrets)")
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
	chatAPI := *chatURL
	var demo *demoChat
	if chatAPI == Builtin {
		if demo, err = startDemoChat(log); err != nil {
			return err
		}
		defer demo.stop()
		chatAPI = demo.url
	}
	a, err := agent.New(agent.Config{
		Ledger: ledgerapi.Remote(client), Chat: agent.NewHTTPChat(chatAPI, nil),
		SigningSecret: *secret, Budget: *budget, Logger: log,
	})
	if err != nil {
		return err
	}
	var handler http.Handler = a
	if demo != nil {
		if handler, err = demo.front(a, *secret); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Info("agent listening", zap.String("listen", ln.Addr().String()), zap.String("ledger", *ledgerURL),
		zap.String("chat", chatAPI))
	if ready != nil {
		ready(Addrs{Listen: ln.Addr().String(), Chat: chatAPI})
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
