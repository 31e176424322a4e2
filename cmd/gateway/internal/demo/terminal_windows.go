//go:build windows

package demo

import (
	"io"
	"os"

	"golang.org/x/sys/windows"
)

// isTerminal reports whether out is a Windows console that shows ANSI
// colours. A console prints escape codes as text unless virtual terminal
// processing is on, which Windows Terminal has by default and the classic
// console host does not: so it is switched on here, and where it cannot
// be (a console older than Windows 10, or not a console: a pipe, a file,
// NUL) the demo writes no colour.
func isTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	if !ok {
		return false
	}
	h := windows.Handle(f.Fd())
	var mode uint32
	if windows.GetConsoleMode(h, &mode) != nil {
		return false
	}
	if mode&windows.ENABLE_VIRTUAL_TERMINAL_PROCESSING != 0 {
		return true
	}
	return windows.SetConsoleMode(h, mode|windows.ENABLE_VIRTUAL_TERMINAL_PROCESSING) == nil
}
