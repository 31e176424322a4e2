package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// health probes a running gateway's readiness, so a container image
// without a shell (distroless) can still have a HEALTHCHECK: the exit
// status is the answer.
func (a *App) health(ctx context.Context, args []string) error {
	fs := a.flags("health")
	target := fs.String("url", "", "probe URL (default: /readyz on admin.listen from --config, else http://127.0.0.1:8081/readyz)")
	path := fs.String("config", "", "gateway configuration file, to find admin.listen")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if err := parse(fs, args); err != nil {
		return err
	}
	u := *target
	if u == "" && *path != "" {
		cfg, err := a.loadConfigFor(*path, []string{"admin.listen"}, nil)
		if err != nil {
			return err
		}
		if cfg.Admin.Listen == "" {
			return usageError{"health: admin disabled in " + *path + ": pass --url"}
		}
		u = "http://" + dialable(cfg.Admin.Listen) + "/readyz"
	}
	if u == "" {
		u = defaultAdminURL + "/readyz"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return usageError{"--url: " + err.Error()}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	msg := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s answered %s: %s", u, resp.Status, msg)
	}
	fmt.Fprintf(a.Stdout, "%s: %s\n", u, msg)
	return nil
}
