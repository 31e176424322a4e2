//go:build unix

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Timing of the gateways under test: a short forward timeout gives a
// short claim (forward.timeout + 5 s), so claims run out within a
// scenario, and retries come quickly.
const (
	forwardTimeout = time.Second
	claimTTL       = forwardTimeout + 5*time.Second
	retrySchedule  = "[0s, 250ms, 500ms, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s]"
	debounceQuiet  = 300 * time.Millisecond
)

// sourceRules are the invariants' rules for the sources configSources writes.
var sourceRules = map[string]Rules{"ordered": {Ordered: true}, "burst": {Debounced: true}}

// configSources is the sources section: the mix the provider sends to.
func configSources(secret, agentURL string) string {
	src := func(name, scope, extra string) string {
		s := fmt.Sprintf("  %s:\n    provider: standard-webhooks\n    secrets: [%s]\n    retry_after: 1s\n", name, secret)
		if scope != "" {
			s += "    scope: \"" + scope + "\"\n"
		}
		s += fmt.Sprintf("    forward:\n      url: %s\n      timeout: %s\n      retry: {schedule: %s}\n%s", agentURL, forwardTimeout, retrySchedule, extra)
		return s
	}
	return "sources:\n" +
		src("plain", "", "      mode: queued\n      concurrency: 8\n") +
		src("ordered", "{json:scope}", "      mode: queued\n      order: scope\n") +
		src("burst", "{json:scope}", fmt.Sprintf("      mode: queued\n      debounce: {quiet: %s, max_wait: 2s}\n", debounceQuiet)) +
		src("inline", "", "      mode: inline\n")
}

// Instance is one gateway process, restartable on the same ports and
// configuration.
type Instance struct {
	Name   string
	bin    string
	config string
	log    string
	listen string
	ports  []int // listen and admin, given back after the scenario
	cmd    *exec.Cmd
	exited chan struct{}
}

// URL is the instance's public listener.
func (g *Instance) URL() string { return "http://" + g.listen }

// newInstance writes the instance's configuration: store is the YAML
// flow map of its store section.
func newInstance(ports *Ports, dir, name, bin, store, sources string) (*Instance, error) {
	port, err := ports.Take()
	if err != nil {
		return nil, err
	}
	listen := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	adminPort, err := ports.Take()
	if err != nil {
		return nil, err
	}
	// The admin listener is unused here, but it listens by default: on a
	// port of the range, so instances do not collide.
	cfg := fmt.Sprintf("listen: %s\nadmin: {listen: \"127.0.0.1:%d\"}\nstore: %s\nlog: {level: warn, format: json}\nserver: {shutdown_grace: 3s}\n%s", listen, adminPort, store, sources)
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	return &Instance{Name: name, bin: bin, config: path, log: filepath.Join(dir, name+".log"), listen: listen,
		ports: []int{port, adminPort}}, nil
}

// Start starts the process and waits until its listener accepts.
func (g *Instance) Start(ctx context.Context) error {
	logf, err := os.OpenFile(g.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(g.bin, "serve", "--config", g.config)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, and killed with this program on Linux: a
	// chaos run that dies leaves no gateway behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeath(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return err
	}
	g.cmd, g.exited = cmd, make(chan struct{})
	exited := g.exited
	go func() { _ = cmd.Wait(); close(exited) }() // owned: Kill and Term wait for exited
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", g.listen, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start: %s", g.Name, g.tail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: listener not up in 30 s: %s", g.Name, g.tail())
		}
	}
}

// Running reports whether the process is alive.
func (g *Instance) Running() bool {
	if g.cmd == nil {
		return false
	}
	select {
	case <-g.exited:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits for the exit.
func (g *Instance) Kill() { g.signalWait(syscall.SIGKILL, time.Minute) }

// Term sends SIGTERM and waits for the exit, SIGKILL after wait.
func (g *Instance) Term(wait time.Duration) bool {
	if !g.Running() {
		return true
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
		return true
	case <-time.After(wait):
		g.Kill()
		return false
	}
}

// Pause and Resume send SIGSTOP and SIGCONT.
func (g *Instance) Pause()  { g.signal(syscall.SIGSTOP) }
func (g *Instance) Resume() { g.signal(syscall.SIGCONT) }

func (g *Instance) signal(sig syscall.Signal) {
	if g.Running() {
		_ = g.cmd.Process.Signal(sig)
	}
}

func (g *Instance) signalWait(sig syscall.Signal, wait time.Duration) {
	if !g.Running() {
		return
	}
	_ = g.cmd.Process.Signal(sig)
	_ = g.cmd.Process.Signal(syscall.SIGCONT) // a stopped process must run to take SIGTERM
	select {
	case <-g.exited:
	case <-time.After(wait):
	}
}

// tail is the end of the instance's log, for an error.
func (g *Instance) tail() string {
	b, _ := os.ReadFile(g.log)
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}

// buildGateway builds ./cmd/gateway into dir.
func buildGateway(dir string) (string, error) {
	bin := filepath.Join(dir, "gateway")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gateway")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/gateway: %w", err)
	}
	return bin, nil
}
