package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"

	"go.uber.org/zap"
	"golang.org/x/net/netutil"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/cmd/gateway/internal/server"
)

// listening is what serve listens with: the public server first, then the
// admin server when there is one, each with its listener.
type listening struct {
	servers   []*http.Server
	listeners []net.Listener
	certs     *certReloader // nil without tls.cert
	adminAddr string        // "" without an admin listener
}

// listen opens the public listener (with TLS when configured, and at most
// server.max_connections connections) and the admin listener, behind its
// host guard, for the gateway srv. On an error nothing is left open.
func listen(cfg *config.Config, srv *server.Server, log *zap.Logger) (*listening, error) {
	public, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	var certs *certReloader
	if cfg.TLS.Cert != "" {
		if certs, err = newCertReloader(cfg.TLS); err != nil {
			_ = public.Close()
			return nil, err
		}
		public = tls.NewListener(public, certs.config())
	}
	// Beyond the limit, connections wait in the kernel's accept queue
	// instead of each costing a goroutine and its buffers.
	public = netutil.LimitListener(public, cfg.Server.MaxConnections)
	publicSrv := &http.Server{
		Handler:           srv.Gateway,
		MaxHeaderBytes:    int(cfg.Server.MaxHeaderBytes),
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		ReadTimeout:       cfg.Server.ReadTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
	servers := []*http.Server{publicSrv}
	listeners := []net.Listener{public}
	adminAddr := ""
	if srv.Admin != nil {
		admin, err := net.Listen("tcp", cfg.Admin.Listen)
		if err != nil {
			_ = public.Close()
			return nil, fmt.Errorf("admin.listen: %w", err)
		}
		adminAddr = admin.Addr().String()
		servers = append(servers, &http.Server{
			Handler:           newHostGuard(cfg.Admin.Listen, cfg.Admin.AllowedHosts, log.Named("admin"), srv.Admin),
			MaxHeaderBytes:    int(cfg.Server.MaxHeaderBytes),
			ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
			ReadTimeout:       cfg.Server.ReadTimeout,
			IdleTimeout:       cfg.Server.IdleTimeout,
		})
		listeners = append(listeners, admin)
	}
	return &listening{servers: servers, listeners: listeners, certs: certs, adminAddr: adminAddr}, nil
}
