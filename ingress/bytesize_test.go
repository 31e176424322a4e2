package ingress_test

import (
	"strings"
	"testing"

	"github.com/replyonce/gateway/ingress"
)

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]ingress.ByteSize{"1MiB": 1 << 20, "512KiB": 512 << 10, "2000": 2000, "1 GiB": 1 << 30, "10B": 10} {
		if got, err := ingress.ParseByteSize(in); err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"-1KiB": "positive number of bytes",
		"1MB":   `"1MB" is ambiguous (1000 or 1024?): write 1MiB`,
		"64kb":  "write 64KiB",
		"2 GB":  "write 2GiB",
		"lots":  "not a size",
		"1TiB":  "not a size",
	} {
		if _, err := ingress.ParseByteSize(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseByteSize(%q): %v, want an error containing %q", in, err, want)
		}
	}
}
