package dispatch

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// unparkEvery is how often a sweep looks for parked deliveries of every
// unpaused source, not only of the ones it saw resumed: a resume this
// process missed (it was down, or another one's unparking was cut short)
// is picked up within this time.
const unparkEvery = 30 * time.Second

// park sets aside the due deliveries of paused sources (ledger
// ParkDeliveries), so that a paused source's backlog never fills the
// sweep's page in front of other sources' work, and returns the rest.
func (d *Dispatcher) park(ctx context.Context, items []ledger.QueueItem, paused map[string]bool) ([]ledger.QueueItem, int, error) {
	kept := items[:0:0]
	done := map[[2]string]bool{}
	parked := 0
	for _, q := range items {
		if !paused[q.Source] {
			kept = append(kept, q)
			continue
		}
		k := [2]string{q.Scope, q.Source}
		if done[k] {
			continue
		}
		done[k] = true
		n, err := d.l.Queue().ParkDeliveries(ctx, q.Scope, q.Source)
		if err != nil {
			return nil, 0, fmt.Errorf("park %s %s: %w", q.Source, q.EventID, err)
		}
		parked += n
	}
	return kept, parked, nil
}

// unpark brings back a page of parked deliveries of each source being
// unparked: the ones just resumed and, every unparkEvery, every unpaused
// one. A source stays being unparked until a page finds nothing. It
// reports whether it found any, so that the sweep runs again at once.
func (d *Dispatcher) unpark(ctx context.Context, resumed []string) (bool, error) {
	if d.unparking == nil {
		d.unparking = map[string]bool{}
	}
	for _, name := range resumed {
		d.unparking[name] = true
	}
	if now := d.now(); d.lastUnpark.IsZero() || now.Sub(d.lastUnpark) >= unparkEvery {
		d.lastUnpark = now
		d.mu.Lock()
		for name, s := range d.sources {
			if !s.paused {
				d.unparking[name] = true
			}
		}
		d.mu.Unlock()
	}
	found := false
	for _, name := range slices.Sorted(maps.Keys(d.unparking)) {
		if d.isPaused(name) {
			delete(d.unparking, name) // paused again meanwhile
			continue
		}
		n, err := d.l.Queue().UnparkSource(ctx, name, d.batch)
		if err != nil {
			return false, fmt.Errorf("unpark %s: %w", name, err)
		}
		if n == 0 {
			delete(d.unparking, name)
			continue
		}
		found = true
	}
	return found, nil
}

func (d *Dispatcher) isPaused(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sources[name].paused
}
