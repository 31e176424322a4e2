package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A release build for this machine's platform: the archive holds the
// binary, LICENSE and README.md, SHA256SUMS lists the archive's hash, and
// the binary's `gateway version` prints the stamped version, with no path
// of the build machine inside it.
func TestReleaseStampsTheVersion(t *testing.T) {
	const version = "v1.2.3-rc.1"
	out := t.TempDir()
	host := runtime.GOOS + "/" + runtime.GOARCH
	var log bytes.Buffer
	if err := run(context.Background(), []string{"-version", version, "-out", out, "-targets", host}, &log); err != nil {
		t.Fatal(err)
	}
	name := "gateway_" + version + "_" + runtime.GOOS + "_" + runtime.GOARCH
	exe, archive := "gateway", filepath.Join(out, name+".tar.gz")
	if runtime.GOOS == "windows" {
		exe, archive = "gateway.exe", filepath.Join(out, name+".zip")
	}
	files := readArchive(t, archive)
	for _, want := range []string{name + "/" + exe, name + "/LICENSE", name + "/README.md"} {
		if _, ok := files[want]; !ok {
			t.Errorf("%s lacks %s (has %v)", archive, want, keys(files))
		}
	}
	raw, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	if want := hex.EncodeToString(sum[:]) + "  " + filepath.Base(archive) + "\n"; string(sums) != want {
		t.Errorf("SHA256SUMS:\n%s\nwant:\n%s", sums, want)
	}

	binary := filepath.Join(t.TempDir(), exe)
	if err := os.WriteFile(binary, files[name+"/"+exe], 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(binary, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("gateway version: %v\n%s", err, got)
	}
	if want := "replyonce gateway " + version + "\n"; strings.ReplaceAll(string(got), "\r\n", "\n") != want {
		t.Fatalf("gateway version printed %q, want %q", got, want)
	}
	root, err := moduleRoot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(files[name+"/"+exe], []byte(root)) {
		t.Errorf("the binary holds the build machine's path %s: built without -trimpath?", root)
	}
}

// A version that is not a semantic version, or a target that is not
// GOOS/GOARCH, is refused before anything is built.
func TestReleaseRefusesBadInput(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-version", "1.2.3"},
		{"-version", "v1.2"},
		{"-version", "v1.2.3 "},
		{"-version", "v1.2.3", "-targets", "linux"},
		{"-version", "v1.2.3", "stray"},
	} {
		out := t.TempDir()
		err := run(context.Background(), append(args, "-out", out), io.Discard)
		if err == nil {
			t.Errorf("%q: accepted", args)
			continue
		}
		if entries, _ := os.ReadDir(out); len(entries) > 0 {
			t.Errorf("%q: refused (%v) but wrote %d files", args, err, len(entries))
		}
	}
}

func readArchive(t *testing.T, path string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	if strings.HasSuffix(path, ".zip") {
		zr, err := zip.OpenReader(path)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		for _, f := range zr.File {
			r, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			files[f.Name] = b
		}
		return files
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
