// Package config reads the gateway's YAML configuration: ${ENV} expansion
// inside values (never in keys or structure, so a secret cannot inject
// YAML), defaults, and validation whose every error names the field, such
// as "sources.stripe.secrets[0]: ${STRIPE_WEBHOOK_SECRET} is not set".
//
// Unknown keys are errors: a typo must not silently fall back to a default.
// "$$" stands for a literal "$".
package config
