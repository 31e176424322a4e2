package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"os"

	"go.uber.org/zap"

	"github.com/replyonce/gateway/ledger"
)

// A pause reaches every process through the store's paused sources
// record, which each dispatcher reads at its sweeps, at least once per
// Poll (see Dispatcher.paused). So that the pause
// command can say when every process has stopped the source (and wait for
// it), each dispatcher writes, after a sweep has applied the record, the
// set it applied into a second control record under its instance id
// (ledger.Sources.AckPaused): at once when the set changed, otherwise every
// ledger.PauseAckEvery as a heartbeat that says the process is alive. The
// API's pause waits (ledger.Sources.WaitPaused) until every live entry lists the
// source. An entry is written only after the sweep has set the source's
// paused flag, which every hand-over (Reserve) and every forward (deliver)
// checks: an event accepted after the wait ends is not delivered by that
// process until a resume.

// randomInstance is a dispatcher's id when the gateway names none: the
// host name and 6 random bytes, readable in the pause's answer.
func randomInstance() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "gateway"
	}
	return host + "-" + hex.EncodeToString(b[:])
}

// Instance is this dispatcher's id in the pause acknowledgements.
func (d *Dispatcher) Instance() string { return d.instance }

// ackPaused writes this process's acknowledgement of paused (just
// applied) when it differs from the last one written or the heartbeat is
// due. A dispatcher shutting down writes none (Shutdown removed it).
func (d *Dispatcher) ackPaused(ctx context.Context, paused map[string]bool) error {
	now := d.now() // the ledger's clock, which WaitPaused reads the entries with
	if d.acked != nil && maps.Equal(d.acked, paused) && now.Sub(d.ackedAt) < ledger.PauseAckEvery {
		return nil
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil
	}
	if err := d.l.Sources().AckPaused(ctx, d.instance, paused, now); err != nil {
		return err
	}
	d.acked, d.ackedAt = maps.Clone(paused), now
	return nil
}

// leavePauseAcks removes this process's entry, so that no later pause
// waits for it. A failure only makes a pause wait until the entry is
// stale (ledger.PauseAckLive).
func (d *Dispatcher) leavePauseAcks(ctx context.Context) {
	if len(d.sources) == 0 {
		return
	}
	if err := d.l.Sources().LeavePauseAcks(ctx, d.instance); err != nil {
		d.log.Warn("dispatch: removing this process from the pause acknowledgements failed; a pause may wait for it until its entry is stale", zap.Error(err))
	}
}
