//go:build unix

package testservers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// EnvPorts names the variable holding the port range, "first-last".
const EnvPorts = "REPLYONCE_TEST_PORTS"

// DefaultPorts is the range used when EnvPorts is unset.
const DefaultPorts = "17000-17999"

// portRange reads EnvPorts.
func portRange() (first, last int, err error) {
	spec := os.Getenv(EnvPorts)
	if spec == "" {
		spec = DefaultPorts
	}
	a, b, ok := strings.Cut(spec, "-")
	first, err1 := strconv.Atoi(strings.TrimSpace(a))
	last, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || first < 1024 || last > 65535 || last < first {
		return 0, 0, fmt.Errorf("%s=%q: want a range such as 17000-17999", EnvPorts, spec)
	}
	return first, last, nil
}

// FreePort returns a port of the range that nothing listens on now.
// Another process may still take it before the caller binds it: callers
// start their server and, when it cannot bind, ask again.
func FreePort() (int, error) {
	first, last, err := portRange()
	if err != nil {
		return 0, err
	}
	n := last - first + 1
	start := rand.IntN(n)
	for i := range n {
		p := first + (start+i)%n
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		_ = l.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no free port in %s", os.Getenv(EnvPorts))
}

// Process is one server.
type Process struct {
	Name string // for messages: "redis 17001", "postgres primary"
	Port int
	Dir  string // its working directory and files

	cmd    *exec.Cmd
	exited chan struct{} // closed when it has exited (not for detached ones)
	pid    int
	// how it was started, for Restart: the same program and arguments,
	// and the same wait until it is up
	opts  startOptions
	ready func(context.Context) error
}

// Addr is 127.0.0.1:Port.
func (p *Process) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)) }

// Pid is the server's process id.
func (p *Process) Pid() int { return p.pid }

// Kill ends the server at once (SIGKILL), as a crash would, and waits for
// it to be gone.
func (p *Process) Kill() error {
	return p.signalAndWait(syscall.SIGKILL, time.Minute)
}

// Pause stops the server (SIGSTOP): its connections stay open and nothing
// answers, as on a machine that froze.
func (p *Process) Pause() error { return p.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (p *Process) Resume() error { return p.signal(syscall.SIGCONT) }

// Running reports whether the process has not exited.
func (p *Process) Running() bool {
	if p.exited != nil {
		select {
		case <-p.exited:
			return false
		default:
			return true
		}
	}
	if syscall.Kill(p.pid, 0) != nil {
		return false
	}
	// Not our child: it may have exited and wait for a parent that does
	// not reap it.
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/stat")
	if err != nil {
		return true // no /proc here: kill(0) is all there is
	}
	_, after, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(after, "Z")
}

func (p *Process) signal(sig syscall.Signal) error {
	if !p.Running() {
		return fmt.Errorf("%s has exited", p.Name)
	}
	if err := syscall.Kill(p.pid, sig); err != nil {
		return fmt.Errorf("%s: %v: %w", p.Name, sig, err)
	}
	return nil
}

// signalAndWait sends sig (to a paused process, SIGCONT too, or it could
// not act on it) and waits up to wait for the process to exit.
func (p *Process) signalAndWait(sig syscall.Signal, wait time.Duration) error {
	if !p.Running() {
		return nil
	}
	_ = syscall.Kill(p.pid, sig)
	if sig != syscall.SIGKILL {
		_ = syscall.Kill(p.pid, syscall.SIGCONT)
	}
	deadline := time.Now().Add(wait)
	for p.Running() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not exit within %s of %v", p.Name, wait, sig)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// startOptions says how to run one server.
type startOptions struct {
	name   string
	dir    string   // working directory; log goes to dir/name.log
	bin    string   // program
	args   []string // its arguments
	detach bool     // outlive this program; no reaping
	asUser *syscall.Credential
}

// start runs a server. Its output goes to a log file in its directory, so
// a test can show it when the server misbehaves.
func start(o startOptions) (*Process, error) {
	logPath := filepath.Join(o.dir, logName(o.name))
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(o.bin, o.args...)
	cmd.Dir = o.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	attr := &syscall.SysProcAttr{Credential: o.asUser}
	if o.detach {
		attr.Setsid = true
	} else {
		// A test binary that dies (a panic, a timeout) takes its servers
		// with it rather than leaving them on the shared machine.
		setParentDeathSignal(attr)
	}
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", o.name, err)
	}
	p := &Process{Name: o.name, Dir: o.dir, cmd: cmd, pid: cmd.Process.Pid, opts: o}
	if o.detach {
		_ = cmd.Process.Release()
	} else {
		p.exited = make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(p.exited)
		}()
	}
	return p, nil
}

func logName(name string) string {
	return strings.NewReplacer(" ", "-", "/", "-").Replace(name) + ".log"
}

// Restart starts a server that has exited (killed, crashed) again, with
// the same port, arguments and files, and waits until it is up as it did
// at first.
func (p *Process) Restart(ctx context.Context) error {
	if p.Running() {
		return fmt.Errorf("%s is running", p.Name)
	}
	q, err := start(p.opts)
	if err != nil {
		return err
	}
	p.cmd, p.exited, p.pid = q.cmd, q.exited, q.pid
	if p.ready == nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return waitUntil(wctx, p, "up again", p.ready)
}

// Log returns the end of the server's log, for a failure message.
func (p *Process) Log() string {
	b, err := os.ReadFile(filepath.Join(p.Dir, logName(p.Name)))
	if err != nil {
		return ""
	}
	const tail = 4000
	if len(b) > tail {
		b = b[len(b)-tail:]
	}
	return string(b)
}

// waitUntil polls ready until it reports nil, the process exits, or ctx
// ends.
func waitUntil(ctx context.Context, p *Process, what string, ready func(context.Context) error) error {
	var last error
	for {
		if last = ready(ctx); last == nil {
			return nil
		}
		if !p.Running() {
			return fmt.Errorf("%s exited before %s: %v\n%s", p.Name, what, last, p.Log())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %s: %w (last: %v)", p.Name, what, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// errBind marks a server that could not bind its port: the caller picks
// another and tries again.
var errBind = errors.New("port taken")

// withFreePorts runs try with n free ports until it succeeds, fails for
// another reason than errBind, or has tried five times.
func withFreePorts[T any](n int, try func(ports []int) (T, error)) (T, error) {
	var zero T
	var err error
	for range 5 {
		ports := make([]int, 0, n)
		for len(ports) < n {
			p, perr := FreePort()
			if perr != nil {
				return zero, perr
			}
			if !slices.Contains(ports, p) {
				ports = append(ports, p)
			}
		}
		var v T
		if v, err = try(ports); err == nil || !errors.Is(err, errBind) {
			return v, err
		}
	}
	return zero, err
}
