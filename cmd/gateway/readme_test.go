package main

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// guideFiles are the README and every page under docs/, as paths from
// this package's directory.
func guideFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 10 {
		t.Fatalf("found only %d pages in docs/", len(docs))
	}
	return append([]string{"../../README.md"}, docs...)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var fence = regexp.MustCompile("(?ms)^\\s*```[^\\n]*\\n(.*?)^\\s*```")

// codeOf is the text of a page's fenced code blocks and inline code spans:
// where commands are shown.
func codeOf(page string) string {
	var b strings.Builder
	for _, m := range fence.FindAllStringSubmatch(page, -1) {
		b.WriteString(m[1])
		b.WriteString("\n")
	}
	for _, m := range regexp.MustCompile("`([^`\\n]+)`").FindAllStringSubmatch(fence.ReplaceAllString(page, ""), -1) {
		b.WriteString(m[1])
		b.WriteString("\n")
	}
	return b.String()
}

// Every `gateway <command>` the README and docs/ show is a command the
// binary has, and every flag shown for it is one the command accepts.
func TestReadmeCommandsExist(t *testing.T) {
	// Command lines: "gateway serve --config ...", "go run ./cmd/gateway demo".
	line := regexp.MustCompile(`(?m)^\s*(?:go run \./cmd/gateway|gateway)[ \t]+([a-z]+)((?:[ \t]+[^#\n]*)?)`)
	flag := regexp.MustCompile(`--([a-z][a-z-]*)`)
	for _, file := range guideFiles(t) {
		matches := line.FindAllStringSubmatch(codeOf(readFile(t, file)), -1)
		if filepath.Base(file) == "README.md" && len(matches) < 5 {
			t.Fatalf("found only %d command lines in the README", len(matches))
		}
		name := strings.TrimPrefix(file, "../../")
		for _, m := range matches {
			checkCommandLine(t, name, m[0], m[1], m[2], flag)
		}
	}
}

func checkCommandLine(t *testing.T, file, shown, cmd, rest string, flag *regexp.Regexp) {
	t.Helper()
	shown = strings.TrimSpace(shown)
	app := &App{Stdout: io.Discard, Stderr: io.Discard, LookupEnv: func(string) (string, bool) { return "", false }}
	if cmd == "version" {
		if err := app.Run(context.Background(), []string{cmd}); err != nil {
			t.Errorf("%s shows %q: %v", file, shown, err)
		}
		return
	}
	if cmd == "ledger" || cmd == "events" || cmd == "sources" {
		// Commands with sub-commands: check the first word after it.
		words := strings.Fields(rest)
		if len(words) == 0 || strings.HasPrefix(words[0], "-") || strings.Contains(words[0], "|") {
			return
		}
		cmd = cmd + " " + words[0]
		rest = strings.Join(words[1:], " ")
	}
	args := append(strings.Fields(cmd), "-h")
	err := app.Run(context.Background(), args)
	if err != nil && strings.Contains(err.Error(), "unknown") {
		t.Errorf("%s shows %q, but %q is not a command: %v", file, shown, cmd, err)
		return
	}
	if strings.Contains(rest, " | ") {
		return // a synopsis of alternatives: its flags belong to different sub-commands
	}
	for _, f := range flag.FindAllStringSubmatch(rest, -1) {
		err := app.Run(context.Background(), append(strings.Fields(cmd), "--"+f[1]+"=x", "-h"))
		if err != nil && strings.Contains(err.Error(), "flag provided but not defined") {
			t.Errorf("%s shows %q with --%s, which %s does not accept", file, shown, f[1], cmd)
		}
	}
}

// anchorsOf lists the anchors GitHub makes for a page's headings: lower
// case, punctuation dropped, spaces as hyphens, a repeat numbered.
func anchorsOf(page string) map[string]bool {
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	for _, m := range regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`).FindAllStringSubmatch(fence.ReplaceAllString(page, ""), -1) {
		a := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		slug := a
		for i := 1; out[slug]; i++ {
			slug = a + "-" + string(rune('0'+i))
		}
		out[slug] = true
	}
	return out
}

// Every relative link in the README and docs/ names a file or directory
// that exists, and every #anchor a heading of the page it points into.
func TestDocsLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, file := range guideFiles(t) {
		page := readFile(t, file)
		name := strings.TrimPrefix(file, "../../")
		links := link.FindAllStringSubmatch(fence.ReplaceAllString(page, ""), -1)
		for _, m := range links {
			target := m[1]
			if regexp.MustCompile(`^[a-z]+:`).MatchString(target) {
				continue // https:, mailto:
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s links to %s, which does not exist", name, target)
					continue
				}
			}
			if anchor != "" {
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s links to %s: an anchor into a file that is not Markdown", name, target)
					continue
				}
				if !anchorsOf(readFile(t, dest))[anchor] {
					t.Errorf("%s links to %s, but %s has no heading with anchor #%s", name, target, filepath.Base(dest), anchor)
				}
			}
		}
	}
}

// The README's Layout names every package directory down to two levels
// (ingress/dispatch, stores/bolt, ...), and every path it names exists.
func TestReadmeLayout(t *testing.T) {
	readme := readFile(t, "../../README.md")
	i := strings.Index(readme, "\n## Layout\n")
	if i < 0 {
		t.Fatal("README has no Layout section")
	}
	sec := readme[i+len("\n## Layout\n"):]
	if j := strings.Index(sec, "\n## "); j >= 0 {
		sec = sec[:j]
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z][a-z0-9_./-]*)/?`").FindAllStringSubmatch(sec, -1) {
		p := strings.TrimSuffix(m[1], "/")
		if strings.ContainsAny(p, ".") && !strings.Contains(p, "/") {
			continue // a file name such as doc.go
		}
		listed[p] = true
		if st, err := os.Stat(filepath.Join("../..", p)); err != nil || !st.IsDir() {
			t.Errorf("README's Layout names %s, which is not a directory of the repository", p)
		}
	}
	var pkgs []string
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("../..", path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if base := d.Name(); rel != "." && (strings.HasPrefix(base, ".") || base == "testdata" || base == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		if strings.HasSuffix(rel, ".go") && dir != "." && strings.Count(dir, "/") <= 1 && !slices.Contains(pkgs, dir) {
			pkgs = append(pkgs, dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 20 {
		t.Fatalf("found only %d package directories", len(pkgs))
	}
	for _, p := range pkgs {
		if !listed[p] {
			t.Errorf("README's Layout does not name the package directory %s", p)
		}
	}
}
