package ingress

import (
	"fmt"
	"strconv"
	"strings"
)

// ByteSize is a size in bytes, written in configuration as 512KiB, 1MiB or
// a plain number of bytes (max_body, forward.respond_limit).
type ByteSize int64

// UnmarshalText reads a size as ParseByteSize does, so that the YAML
// reader (and any other text decoder) fills a ByteSize field directly.
func (b *ByteSize) UnmarshalText(text []byte) error {
	v, err := ParseByteSize(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// ParseByteSize parses a size such as "1MiB". KB, MB and GB are refused:
// people write them meaning either 1000 or 1024, and a limit that is off
// by 5% is a limit nobody can reason about.
func ParseByteSize(s string) (ByteSize, error) {
	in := strings.TrimSpace(s)
	num, unit := in, ""
	if i := strings.IndexFunc(in, func(r rune) bool { return (r < '0' || r > '9') && r != '-' && r != '+' }); i >= 0 {
		num, unit = strings.TrimSpace(in[:i]), strings.TrimSpace(in[i:])
	}
	mult := map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
	m, ok := mult[unit]
	if !ok {
		binary := map[string]string{"K": "KiB", "KB": "KiB", "k": "KiB", "kB": "KiB", "kb": "KiB", "M": "MiB", "MB": "MiB", "mb": "MiB", "G": "GiB", "GB": "GiB", "gb": "GiB"}
		if b, ok := binary[unit]; ok {
			return 0, fmt.Errorf("%q is ambiguous (1000 or 1024?): write %s%s, or the number of bytes", in, num, b)
		}
		return 0, fmt.Errorf("%q is not a size: write a number of bytes or a size like 512KiB or 1MiB", in)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<40)/m {
		return 0, fmt.Errorf("%q is not a size: write a positive number of bytes or a size like 512KiB or 1MiB (at most 1024GiB)", in)
	}
	return ByteSize(n * m), nil
}
