// Package suggest finds the valid name a user most likely meant, for
// "did you mean `forward`?" hints on mistyped config keys and subcommands.
package suggest
