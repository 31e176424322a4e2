package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"
)

// controlPauseAcks names the control record in which each dispatcher says
// which sources it has stopped: instance id to PauseAck. A pause waits on
// it (WaitPaused) until every live dispatcher lists the source.
const controlPauseAcks = "pause-acks"

// Pause acknowledgement timing. A dispatcher writes its entry whenever the
// set of sources it has stopped changes and at least every PauseAckEvery
// (a heartbeat), so an entry older than PauseAckLive belongs to a process
// that stopped without saying so; entries older than pauseAckForget are
// dropped at the next write, which keeps the record small.
const (
	PauseAckEvery  = 5 * time.Second
	PauseAckLive   = 3 * PauseAckEvery
	pauseAckForget = time.Minute
)

// PauseAck is one dispatcher's entry: the sources it has stopped (sorted)
// as of At, its own clock's time of the write.
type PauseAck struct {
	Paused []string  `json:"paused"`
	At     time.Time `json:"at"`
}

func parseAcks(raw []byte) map[string]PauseAck {
	acks := map[string]PauseAck{}
	if raw != nil {
		// A corrupt record counts as empty: the next write replaces it.
		if err := json.Unmarshal(raw, &acks); err != nil {
			return map[string]PauseAck{}
		}
	}
	return acks
}

// AckPaused records that the dispatcher instance has stopped exactly the
// sources in paused, as of now. It must be called only once the
// dispatcher starts no delivery of those sources: a pause's caller takes
// this entry as that promise.
func (sr Sources) AckPaused(ctx context.Context, instance string, paused map[string]bool, now time.Time) error {
	l := sr.l
	if instance == "" {
		return fmt.Errorf("%w: instance is empty", ErrInvalid)
	}
	list := make([]string, 0, len(paused))
	for name, p := range paused {
		if p {
			list = append(list, name)
		}
	}
	sort.Strings(list)
	return l.store.TransactControl(ctx, controlPauseAcks, func(cur []byte) ([]byte, error) {
		acks := parseAcks(cur)
		for id, a := range acks {
			if now.Sub(a.At) > pauseAckForget {
				delete(acks, id)
			}
		}
		acks[instance] = PauseAck{Paused: list, At: now}
		return json.Marshal(acks)
	})
}

// LeavePauseAcks removes the instance's entry, as a dispatcher shutting
// down does, so that no later pause waits for it.
func (sr Sources) LeavePauseAcks(ctx context.Context, instance string) error {
	l := sr.l
	return l.store.TransactControl(ctx, controlPauseAcks, func(cur []byte) ([]byte, error) {
		acks := parseAcks(cur)
		if _, ok := acks[instance]; !ok {
			return nil, nil
		}
		delete(acks, instance)
		return json.Marshal(acks)
	})
}

// PauseAcks returns every dispatcher's entry, stale ones included.
func (sr Sources) PauseAcks(ctx context.Context) (map[string]PauseAck, error) {
	l := sr.l
	raw, err := l.store.ReadControl(ctx, controlPauseAcks)
	if err != nil {
		return nil, err
	}
	return parseAcks(raw), nil
}

// PauseWait is what WaitPaused found: the live dispatchers that have
// stopped the source, and the ones that had not when the wait ended.
type PauseWait struct {
	Stopped []string
	Missing []string
}

// pauseWaitPoll is how often WaitPaused reads the record.
const pauseWaitPoll = 20 * time.Millisecond

// WaitPaused waits until every live dispatcher (an entry written within
// PauseAckLive of the ledger's clock) lists source as stopped, or until
// maxWait has passed (then Missing names the ones that had not). Every
// dispatcher reads the paused sources at least once per forward poll (1 s
// by default), so a live one answers within a poll.
func (sr Sources) WaitPaused(ctx context.Context, source string, maxWait time.Duration) (PauseWait, error) {
	l := sr.l
	deadline := time.NewTimer(maxWait)
	defer deadline.Stop()
	tick := time.NewTicker(pauseWaitPoll)
	defer tick.Stop()
	for {
		acks, err := sr.PauseAcks(ctx)
		if err != nil {
			return PauseWait{}, err
		}
		var w PauseWait
		now := l.now()
		for id, a := range acks {
			if now.Sub(a.At) > PauseAckLive {
				continue // stopped without leaving
			}
			if slices.Contains(a.Paused, source) {
				w.Stopped = append(w.Stopped, id)
			} else {
				w.Missing = append(w.Missing, id)
			}
		}
		sort.Strings(w.Stopped)
		sort.Strings(w.Missing)
		if len(w.Missing) == 0 {
			return w, nil
		}
		select {
		case <-ctx.Done():
			return w, fmt.Errorf("ledger: waiting for every dispatcher to stop %q: %w", source, ctx.Err())
		case <-deadline.C:
			return w, nil
		case <-tick.C:
		}
	}
}
