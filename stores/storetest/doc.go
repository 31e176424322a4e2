// Package storetest is the one conformance and race suite every
// ledger.Store must pass unchanged. A store's own test calls Run with a
// constructor that returns a fresh, empty, isolated store for each subtest
// (its own file, table or key prefix).
//
// The suite drives the real ledger over the store, with an injected clock:
// no test sleeps to let a TTL run out. It covers the store contract itself
// (atomic read-modify-write under many goroutines, nil writes, errors
// passed through) and every guarantee the ledger makes, so a store that
// passes behaves exactly like every other.
package storetest
