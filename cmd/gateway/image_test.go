//go:build linux

// The image is a Linux image, and the test drops privileges with
// util-linux's setpriv: it runs where the image does.

package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replyonce/gateway/signatures"
)

// imageLayout is what the Dockerfile's final stage does to the file
// system, read from the Dockerfile itself so that the test follows it.
type imageLayout struct {
	copies  []imageCopy
	user    string
	workdir string
	command []string // ENTRYPOINT then CMD
}

type imageCopy struct {
	fromBuild bool
	chown     string
	src, dst  string
}

func readImageLayout(t *testing.T, path string) imageLayout {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var l imageLayout
	var entry, cmd []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch fields[0] {
		case "FROM":
			l, entry, cmd = imageLayout{}, nil, nil // only the final stage counts
		case "COPY":
			var c imageCopy
			args := fields[1:]
			for len(args) > 0 && strings.HasPrefix(args[0], "--") {
				switch {
				case args[0] == "--from=build":
					c.fromBuild = true
				case strings.HasPrefix(args[0], "--chown="):
					c.chown = strings.TrimPrefix(args[0], "--chown=")
				}
				args = args[1:]
			}
			if len(args) != 2 {
				c.src = "" // checked below, if this is the final stage
			} else {
				c.src, c.dst = args[0], args[1]
			}
			l.copies = append(l.copies, c)
		case "USER":
			l.user = fields[1]
		case "WORKDIR":
			l.workdir = fields[1]
		case "ENTRYPOINT", "CMD":
			var list []string
			if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(sc.Text(), fields[0]))), &list); err != nil {
				t.Fatalf("Dockerfile: %s is not exec form: %v", fields[0], err)
			}
			if fields[0] == "ENTRYPOINT" {
				entry = list
			} else {
				cmd = list
			}
		}
	}
	l.command = append(entry, cmd...)
	for _, c := range l.copies {
		if c.src == "" {
			t.Fatal("Dockerfile: a COPY of the final stage copies several paths; this test reads one source and one destination")
		}
	}
	return l
}

// As the image's non-root user, in a fresh root-owned tree laid out the
// way the Dockerfile lays out the image, the image's own command starts on
// bolt with the image's default config and serves a webhook. Docker is not
// needed: setpriv drops to the user, as the container runtime would.
func TestImageRunsAsNonRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("this test must run as root in CI (it prepares a root-owned tree and drops to uid 65532)")
		}
		t.Skip("needs root to prepare a root-owned tree and drop privileges")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv (util-linux) is needed: ", err)
	}
	l := readImageLayout(t, "../../Dockerfile")
	if l.user != "65532:65532" && l.user != "nonroot:nonroot" {
		t.Fatalf("Dockerfile USER %q, want the distroless nonroot user 65532", l.user)
	}
	root, err := os.MkdirTemp("", "image-root-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	binary := filepath.Join(t.TempDir(), "gateway")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, c := range l.copies {
		dst := filepath.Join(root, c.dst)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case c.fromBuild && c.src == "/out/gateway":
			copyFile(t, binary, dst, 0o755)
		case c.fromBuild:
			// Anything else from the build stage is a directory it made
			// (RUN mkdir): an empty directory.
			if err := os.Mkdir(dst, 0o755); err != nil {
				t.Fatal(err)
			}
		default:
			copyFile(t, filepath.Join("../..", c.src), dst, 0o644)
		}
		if c.chown != "" {
			uid, gid, _ := strings.Cut(c.chown, ":")
			u, _ := strconv.Atoi(uid)
			g, _ := strconv.Atoi(gid)
			if err := os.Chown(dst, u, g); err != nil {
				t.Fatal(err)
			}
		}
	}
	workdir := filepath.Join(root, l.workdir)
	if err := os.MkdirAll(workdir, 0o755); err != nil { // as WORKDIR does: root-owned when new
		t.Fatal(err)
	}

	// The image's config, on ports of this test's own (the machine is
	// shared), with its variables set.
	configPath := ""
	var args []string
	for _, a := range l.command {
		if strings.HasPrefix(a, "/") {
			a = filepath.Join(root, a)
		}
		if strings.HasSuffix(a, ".yaml") {
			configPath = a
		}
		args = append(args, a)
	}
	if configPath == "" {
		t.Fatalf("the image's command %q names no config", l.command)
	}
	publicPort, adminPort := freePort(t), freePort(t)
	raw, err := os.ReadFile(configPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(strings.Replace(string(raw), "0.0.0.0:8080", "127.0.0.1:"+publicPort, 1), "0.0.0.0:8081", "127.0.0.1:"+adminPort, 1)
	if cfg == string(raw) {
		t.Fatal("the image's config does not listen on 0.0.0.0:8080")
	}
	if err := os.WriteFile(configPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	agent := newSink(t)
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	cmd := exec.Command(setpriv, append([]string{"--reuid=65532", "--regid=65532", "--clear-groups", args[0]}, args[1:]...)...)
	cmd.Dir = workdir
	cmd.Env = []string{"WEBHOOK_SECRET=" + secret, "AGENT_URL=" + agent.srv.URL + "/events", "GATEWAY_ADMIN_TOKEN=image-test-token"}
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	// The image's healthcheck command, as the same user, turns healthy.
	healthy := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !healthy; {
		select {
		case <-exited:
			t.Fatalf("the gateway exited: %v\n%s", waitErr, logs.String())
		default:
		}
		probe := exec.Command(setpriv, "--reuid=65532", "--regid=65532", "--clear-groups", filepath.Join(root, "usr/local/bin/gateway"),
			"health", "--url", "http://127.0.0.1:"+adminPort+"/readyz")
		healthy = probe.Run() == nil
		if !healthy {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !healthy {
		t.Fatalf("gateway health never passed\n%s", logs.String())
	}

	signer, err := signatures.NewSigner("standard-webhooks", signatures.Config{Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	req := &signatures.Request{Method: http.MethodPost, URL: "http://127.0.0.1:" + publicPort + "/hooks/events",
		Header: http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {"msg_image_1"}}, Body: []byte(`{"type":"ping"}`)}
	if err := signer.Sign(req, time.Now()); err != nil {
		t.Fatal(err)
	}
	hreq, _ := http.NewRequest(http.MethodPost, req.URL, strings.NewReader(string(req.Body)))
	hreq.Header = req.Header
	resp, err := newClient(t).Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// Inline sources answer 200 once delivered, queued ones 202 once
	// stored; either way the agent gets the event.
	accepted := resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"delivered"`) ||
		resp.StatusCode == http.StatusAccepted && strings.Contains(string(body), `"queued"`)
	if !accepted {
		t.Fatalf("webhook: %d %s\n%s", resp.StatusCode, body, logs.String())
	}
	for deadline := time.Now().Add(30 * time.Second); agent.count() != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent got %d forwards, want 1\n%s", agent.count(), logs.String())
		}
	}
	// The ledger is a file the non-root user wrote in the image's data
	// directory.
	var st syscall.Stat_t
	ledgerFile := filepath.Join(workdir, "data", "ledger.db")
	if err := syscall.Stat(ledgerFile, &st); err != nil || st.Uid != 65532 {
		t.Fatalf("ledger file %s: %v, uid %d", ledgerFile, err, st.Uid)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, mode); err != nil {
		t.Fatal(err)
	}
}
