// Package field is the one error type for configuration problems: the
// field a problem is in, named as the configuration file names it
// ("sources.stripe.forward.timeout", "sources.s.secrets[0]"), and the line
// when the problem was found in a file.
//
// Every package that owns a piece of the configuration (ingress for a
// source, ingress/dispatch for its queue policy, ingress/filter for an
// ignore rule, the gateway's config reader for the file) reports with it,
// so `gateway check` can list every problem of a file at once, each with
// its field and line, without converting one error type into another.
//
// It imports nothing of ours, so any package may report with it.
package field
