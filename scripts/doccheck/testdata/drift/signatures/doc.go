// Package signatures verifies webhooks, one verifier per provider listed
// in PROVIDERS.md (see fields.go and dispatch/doc.go).
package signatures
