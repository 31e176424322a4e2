// Package groupcommit sends concurrent store writes together: the
// Postgres store groups them into one transaction (one commit), the Redis
// store into one pipeline. A lone writer is never made to wait; what each
// write decides is the store's business, not this package's: it only
// moves writes into batches and results back to their callers.
package groupcommit
