// Package tooltest holds the scenarios every adapter of package tool must
// pass, so that the core package and each SDK adapter (a nested module)
// prove the same behaviour through their own types: the seed's race of
// three concurrent refunds and a late retry, over an in-process ledger and
// over the ledger API. The caller gives the store: this package imports no
// store adapter, so an adapter's module pulls in no database driver.
package tooltest
