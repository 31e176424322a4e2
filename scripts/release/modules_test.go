package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

// A nested module, at the version the release tags, resolves on its own
// through a module proxy: `go get MODULE@VERSION` in a fresh module,
// nothing else. The proxy is a directory (GOPROXY=file://...) holding the
// gateway's root module and the nested modules at that version, made from
// this repository's files as a tag of this commit would serve them;
// every other module comes from the proxies `go env GOPROXY` names (the
// local module cache first, to spare the network what is already here).
// Each nested go.mod must require the root at that tagged version, not the
// placeholder v0.0.0-00010101000000-000000000000 that only the replace
// resolves, and must keep the replace for local development.
func TestNestedModulesResolveThroughAProxy(t *testing.T) {
	ctx := context.Background()
	root, err := moduleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	version := nestedVersion(t, root)

	proxy := t.TempDir()
	files := repoFiles(t, root)
	publish(t, proxy, modulePath, version, root, files, "")
	for _, dir := range nestedModules {
		publish(t, proxy, modulePath+"/"+dir, version, filepath.Join(root, filepath.FromSlash(dir)), files, dir+"/")
	}

	upstream := strings.TrimSpace(goEnv(t, "GOPROXY"))
	if upstream == "" || upstream == "off" {
		t.Fatalf("go env GOPROXY is %q: the nested modules' dependencies cannot be fetched", upstream)
	}
	proxies := []string{fileURL(proxy)}
	if cache := filepath.Join(goEnv(t, "GOMODCACHE"), "cache", "download"); isDir(cache) {
		proxies = append(proxies, fileURL(cache))
	}
	proxies = append(proxies, upstream)
	gopath := t.TempDir()
	env := append(os.Environ(),
		"GOPROXY="+strings.Join(proxies, ","),
		// The versions in the local proxy are not in the public checksum
		// database; every other module is still checked against it.
		"GONOSUMDB="+modulePath, "GOPRIVATE=", "GONOPROXY=",
		"GOFLAGS=-mod=mod -modcacherw", // a temporary cache its cleanup can remove
		"GOPATH="+gopath, "GOMODCACHE="+filepath.Join(gopath, "pkg", "mod"),
		"GOWORK=off", "GOTOOLCHAIN=local")

	for _, dir := range nestedModules {
		mod := modulePath + "/" + dir
		t.Run(dir, func(t *testing.T) {
			consumer := t.TempDir()
			goCmd(t, consumer, env, "mod", "init", "example.com/consumer")
			goCmd(t, consumer, env, "get", mod+"@"+version)
			got := strings.Fields(goCmd(t, consumer, env, "list", "-m", mod, modulePath))
			if want := []string{mod, version, modulePath, version}; !slices.Equal(got, want) {
				t.Fatalf("go list -m: %q, want %q", got, want)
			}
			// Every package the nested module's own packages import
			// resolves (go list loads them without compiling).
			goCmd(t, consumer, env, "list", "-deps", mod+"/...")
		})
	}
}

// nestedModules are the modules released with the gateway, by their
// directory. Each requires the root module at the release's version.
var nestedModules = []string{"ledger/river", "ledger/tool/anthropic", "ledger/tool/mcp", "ledger/tool/openai"}

// nestedVersion is the root version every nested module requires. It
// fails the test unless they all require one tagged version and replace
// the root with the local directory.
func nestedVersion(t *testing.T, root string) string {
	t.Helper()
	var version string
	var found []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.Name() != "go.mod" || filepath.Dir(p) == root {
			return nil
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := modfile.Parse(p, raw, nil)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		dir = filepath.ToSlash(dir)
		var req string
		for _, r := range f.Require {
			if r.Mod.Path == modulePath {
				req = r.Mod.Version
			}
		}
		if req == "" {
			return nil // an example that does not use the gateway's packages
		}
		found = append(found, dir)
		if f.Module.Mod.Path != modulePath+"/"+dir {
			t.Errorf("%s: module %s, want %s (its tag is %s/vX.Y.Z)", p, f.Module.Mod.Path, modulePath+"/"+dir, dir)
		}
		if !semver.IsValid(req) || module.IsPseudoVersion(req) {
			t.Errorf("%s requires %s %s, want a tagged version (a release tags the root first)", p, modulePath, req)
		}
		if version == "" {
			version = req
		} else if req != version {
			t.Errorf("%s requires %s %s, others %s: one release, one version", p, modulePath, req, version)
		}
		local := false
		for _, r := range f.Replace {
			if r.Old.Path == modulePath && filepath.Clean(filepath.Join(filepath.Dir(p), r.New.Path)) == filepath.Clean(root) {
				local = true
			}
		}
		if !local {
			t.Errorf("%s lacks `replace %s => %s`, which local development needs", p, modulePath, relRoot(dir))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(found)
	if !slices.Equal(found, nestedModules) {
		t.Fatalf("nested modules requiring the root: %q, want %q (a new one is released, and listed, with the others)", found, nestedModules)
	}
	if t.Failed() {
		t.FailNow()
	}
	return version
}

func relRoot(dir string) string {
	return strings.TrimSuffix(strings.Repeat("../", strings.Count(dir, "/")+1), "/")
}

// repoFiles are the repository's files as a commit of it holds them:
// tracked, or new and not ignored (so that the test sees uncommitted
// work), as slash paths from the root.
func repoFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v (the test packs the repository's files as a tag would)", root, err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files
}

type diskFile struct{ slash, path string }

func (f diskFile) Path() string                 { return f.slash }
func (f diskFile) Lstat() (os.FileInfo, error)  { return os.Lstat(f.path) }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.path) }

// publish writes module mod at version into the file proxy dir: list,
// .info, .mod and the .zip of the repository files under prefix (files of
// modules nested further are left out by modzip, as the go command
// leaves them out of a tag's zip).
func publish(t *testing.T, proxy, mod, version, dir string, repo []string, prefix string) {
	t.Helper()
	var files []modzip.File
	for _, f := range repo {
		rel, ok := strings.CutPrefix(f, prefix)
		if !ok {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if _, err := os.Lstat(p); err != nil {
			continue // deleted in the work tree, not yet committed
		}
		files = append(files, diskFile{rel, p})
	}
	escaped, err := module.EscapePath(mod)
	if err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(proxy, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	var zip bytes.Buffer
	if err := modzip.Create(&zip, module.Version{Path: mod, Version: version}, files); err != nil {
		t.Fatalf("%s@%s zip: %v", mod, version, err)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]any{"Version": version, "Time": time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	for name, data := range map[string][]byte{
		"list": []byte(version + "\n"), version + ".info": info, version + ".mod": gomod, version + ".zip": zip.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func fileURL(dir string) string {
	p := path.Clean(filepath.ToSlash(dir))
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // C:/x on Windows is file:///C:/x
	}
	return (&url.URL{Scheme: "file", Path: p}).String()
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return string(out)
}
