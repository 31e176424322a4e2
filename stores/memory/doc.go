// Package memory is a ledger.Store that keeps documents in process memory.
//
// It is for tests, the demo and single-instance experiments: everything is
// lost when the process exits, so deduplication does not survive a restart.
// Transactions are serialised by one mutex, which makes every
// read-modify-write trivially atomic within the process and never across
// processes.
package memory
