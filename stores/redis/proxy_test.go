package redis

import (
	"errors"
	"net"
	"sync"
	"testing"
)

// proxyMode is what the test proxy does with traffic.
type proxyMode int

const (
	proxyPass  proxyMode = iota // forward both ways
	proxyStall                  // keep connections open, forward nothing (bytes are thrown away)
	proxyDrop                   // close every connection, new ones at once
)

// faultProxy sits between a client and the real server and fails on
// command. Bytes that arrive while it stalls are discarded, never delivered
// late, so a command the client gave up on cannot land afterwards.
type faultProxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu    sync.Mutex
	mode  proxyMode
	conns map[net.Conn]struct{}

	wg sync.WaitGroup // the accept loop and every pump
}

func startProxy(t testing.TB, target string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{t: t, ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Go(p.acceptLoop)
	t.Cleanup(p.close)
	return p
}

func (p *faultProxy) addr() string { return p.ln.Addr().String() }

// set switches the mode. Leaving a stall or entering a drop cuts every
// open connection, as a healed partition or a restarted server would.
func (p *faultProxy) set(m proxyMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m != p.mode && (p.mode == proxyStall || m == proxyDrop) {
		for c := range p.conns {
			_ = c.Close()
		}
	}
	p.mode = m
}

func (p *faultProxy) current() proxyMode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

func (p *faultProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// track registers c, or closes it and says so when the proxy is dropping.
func (p *faultProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == proxyDrop {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *faultProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *faultProxy) acceptLoop() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.t.Errorf("proxy accept: %v", err)
			}
			return
		}
		if !p.track(client) {
			continue
		}
		var server net.Conn
		if p.current() == proxyPass {
			server, err = net.Dial("tcp", p.target)
			if err != nil {
				p.untrack(client)
				continue
			}
			if !p.track(server) {
				p.untrack(client)
				continue
			}
		}
		p.wg.Go(func() { p.pump(client, server) })
		if server != nil {
			p.wg.Go(func() { p.pump(server, client) })
		}
	}
}

// pump copies src to dst (dst nil: a connection accepted while stalled,
// never forwarded) until either side closes.
func (p *faultProxy) pump(src, dst net.Conn) {
	defer func() {
		p.untrack(src)
		if dst != nil {
			p.untrack(dst)
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && dst != nil && p.current() == proxyPass {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
