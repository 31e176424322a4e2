// Package stores groups the ledger's storage backends, one sub-package per
// backend, each named after what it stores in: memory, bolt, postgres and
// redis. Every one of them passes the same conformance and race suite,
// stores/storetest.
package stores
