//go:build !windows

package demo

import (
	"io"
	"os"
)

// isTerminal reports whether out is a character device, which is what a
// terminal is to Stat; golang.org/x/term would ask more precisely, but is
// not worth a dependency for colour.
func isTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
