package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
)

// controlPaused names the control record of paused sources: a small JSON
// object (source name to true), shared by every process on the store.
const controlPaused = "paused-sources"

// legacyPausedScope is where releases before control records kept the
// paused sources: an ordinary scope, which a webhook could overwrite. It is
// read while the control record has never been written, so a gateway
// upgraded in place still knows its paused sources; the first read, pause
// or resume after the upgrade copies them into the control record (an
// empty one when the old scope is absent, as on a new store), which is the
// only one read from then on: a dispatcher's sweep then costs one read,
// not two (issue #29). The ledger never writes the old scope, and
// ReservedScope keeps everyone else out of it.
const legacyPausedScope = "replyonce:control:paused-sources"

// ErrCorruptControl marks a control record that cannot be read. It is
// never a reason to stop work: PausedSources returns it with an empty set,
// and the next pause or resume writes a fresh record over it.
var ErrCorruptControl = errors.New("ledger: control record is corrupt")

func parsePaused(raw []byte) (map[string]bool, error) {
	set := map[string]bool{}
	if err := json.Unmarshal(raw, &set); err != nil {
		return map[string]bool{}, err
	}
	for name, p := range set {
		if !p {
			delete(set, name)
		}
	}
	return set, nil
}

// pausedBefore returns the paused sources as the record read before a
// write says (the old scope when there is no record yet, see
// legacyPausedScope); recorded says whether the record was there.
func (l *Ledger) pausedBefore(ctx context.Context) (set map[string]bool, recorded bool, err error) {
	raw, err := l.store.ReadControl(ctx, controlPaused)
	if err != nil {
		return nil, false, err
	}
	if raw != nil {
		set, err := parsePaused(raw)
		if err != nil {
			return set, true, fmt.Errorf("%w: %q: %v", ErrCorruptControl, controlPaused, err)
		}
		return set, true, nil
	}
	raw, err = l.store.Read(ctx, legacyPausedScope)
	if err != nil {
		return nil, false, err
	}
	if raw == nil {
		return map[string]bool{}, false, nil
	}
	set, err = parsePaused(raw)
	if err != nil {
		return set, false, fmt.Errorf("%w: the paused sources kept by an earlier release in scope %q: %v", ErrCorruptControl, legacyPausedScope, err)
	}
	return set, false, nil
}

// SetSourcePaused pauses or resumes dispatching a source's queued events,
// for every process sharing the store. A paused source keeps accepting. A
// corrupt record is replaced by one holding this change alone.
func (sr Sources) SetSourcePaused(ctx context.Context, source string, paused bool) error {
	l := sr.l
	if source == "" {
		return fmt.Errorf("%w: source is empty", ErrInvalid)
	}
	// The sources an earlier release paused, for a record not yet written;
	// a corrupt one counts as none.
	legacy, _, err := l.pausedBefore(ctx)
	if err != nil && !errors.Is(err, ErrCorruptControl) {
		return err
	}
	return l.store.TransactControl(ctx, controlPaused, func(cur []byte) ([]byte, error) {
		set := maps.Clone(legacy)
		if cur != nil {
			parsed, err := parsePaused(cur)
			if err == nil && parsed[source] == paused {
				return nil, nil
			}
			set = parsed // a corrupt record: a fresh set, written over it
		}
		if paused {
			set[source] = true
		} else {
			delete(set, source)
		}
		return json.Marshal(set)
	})
}

// PausedSources returns the sources whose dispatch is paused. A record
// that cannot be read gives an empty set and an error wrapping
// ErrCorruptControl: dispatchers log it and go on as if nothing were
// paused, rather than stop.
func (sr Sources) PausedSources(ctx context.Context) (map[string]bool, error) {
	l := sr.l
	set, recorded, err := l.pausedBefore(ctx)
	if err != nil && !errors.Is(err, ErrCorruptControl) {
		return nil, err
	}
	if err == nil && !recorded {
		// Copy what the old scope says into the record, unless a pause or
		// resume wrote one meanwhile. Failing to is no reason to fail the
		// read: the set is right, and the next read tries again.
		_ = l.store.TransactControl(ctx, controlPaused, func(cur []byte) ([]byte, error) {
			if cur != nil {
				return nil, nil
			}
			return json.Marshal(set)
		})
	}
	return set, err
}
