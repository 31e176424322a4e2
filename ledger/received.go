package ledger

import "context"

// ScopesReceived lists up to limit scopes that received an event, newest
// first (ties by scope, descending), strictly after before; a zero before
// starts from the newest. It is the store's received index as it is
// (Store.ScopesReceived), read only: a listing of conversations pages
// through it and reads only the scopes it shows.
func (vw Views) ScopesReceived(ctx context.Context, before ScopeAt, limit int) ([]ScopeAt, error) {
	l := vw.l
	return l.store.ScopesReceived(ctx, before, limit)
}
