// Package when reads the times operators type: an RFC 3339 instant, or a
// span back from now ("10m", "1h30m", "2d"), as `--since 1h` means "the
// last hour". The CLI and the console read times with it alike.
package when
