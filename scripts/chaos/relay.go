//go:build unix

package main

import (
	"net"
	"sync"
)

// Relay is a TCP relay between a gateway and its store that the
// scenarios control: Stall holds every byte in both directions (the
// store answers slowly, or not at all, while connections stay open), Cut
// drops every connection and refuses new ones (the store is down), Heal
// ends either.
type Relay struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	stalled bool
	cut     bool
	healed  chan struct{} // closed on Heal; a fresh one while stalled
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
	closing bool
}

// NewRelay listens on addr and relays each connection to target.
func NewRelay(addr, target string) (*Relay, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &Relay{ln: ln, target: target, conns: map[net.Conn]struct{}{}, healed: make(chan struct{})}
	close(r.healed)
	r.wg.Go(r.accept)
	return r, nil
}

// Addr is the address the gateway connects to.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Stall holds every byte until Heal.
func (r *Relay) Stall() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stalled {
		r.stalled = true
		r.healed = make(chan struct{})
	}
}

// Cut closes every connection and refuses new ones until Heal.
func (r *Relay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = true
	for c := range r.conns {
		_ = c.Close()
	}
}

// Heal lets bytes flow again and connections in.
func (r *Relay) Heal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = false
	if r.stalled {
		r.stalled = false
		close(r.healed)
	}
}

// Close stops the relay and waits for its goroutines.
func (r *Relay) Close() {
	r.mu.Lock()
	r.closing = true
	_ = r.ln.Close()
	for c := range r.conns {
		_ = c.Close()
	}
	if r.stalled {
		r.stalled = false
		close(r.healed)
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *Relay) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		if r.cut || r.closing {
			r.mu.Unlock()
			_ = c.Close()
			continue
		}
		r.conns[c] = struct{}{}
		r.mu.Unlock()
		r.wg.Go(func() { r.serve(c) })
	}
}

func (r *Relay) serve(c net.Conn) {
	defer r.forget(c)
	s, err := net.Dial("tcp", r.target)
	if err != nil {
		return
	}
	r.mu.Lock()
	if r.cut || r.closing {
		r.mu.Unlock()
		_ = s.Close()
		return
	}
	r.conns[s] = struct{}{}
	r.mu.Unlock()
	defer r.forget(s)
	var wg sync.WaitGroup
	wg.Go(func() { r.pipe(s, c) })
	r.pipe(c, s)
	wg.Wait()
}

// pipe copies from src to dst, chunk by chunk, each chunk waiting while
// the relay is stalled; either side's end closes both.
func (r *Relay) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.mu.Lock()
			healed := r.healed
			r.mu.Unlock()
			<-healed
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // io.EOF or a closed connection alike: the other side is closed too
		}
	}
}

func (r *Relay) forget(c net.Conn) {
	_ = c.Close()
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}
