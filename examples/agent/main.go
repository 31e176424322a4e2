// Command agent is the example agent: it takes the gateway's forwarded chat
// events and replies through the ledger API, once per customer message.
//
//	agent --listen 127.0.0.1:9000 --ledger http://127.0.0.1:8081 --chat http://127.0.0.1:9100
//
// The gateway's admin token comes from --token or GATEWAY_ADMIN_TOKEN, the
// signing secret (the gateway's forward.signing_secret) from
// --signing-secret or FORWARD_SIGNING_SECRET. Without --chat it runs a demo
// chat in-process for local trials (see package agentcmd). See package
// agent for what it does and promises.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/replyonce/gateway/examples/agent/agentcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := agentcmd.Run(ctx, os.Args[1:], os.Getenv, nil)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}
