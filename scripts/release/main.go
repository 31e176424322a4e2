package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// allTargets are the platforms a release ships for.
const allTargets = "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64,windows/arm64"

const modulePath = "github.com/replyonce/gateway"

// versionPattern is a semantic version with its v, as Go module tags are
// written, so a binary's version and the module's tag can be the same.
var versionPattern = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

type target struct{ goos, goarch string }

func (t target) String() string { return t.goos + "/" + t.goarch }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	version := fs.String("version", "", "the version to stamp, a semantic version such as v0.3.0 (required)")
	out := fs.String("out", "dist", "directory for the archives and SHA256SUMS")
	targetList := fs.String("targets", allTargets, "comma-separated GOOS/GOARCH pairs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if !versionPattern.MatchString(*version) {
		return fmt.Errorf("-version %q: want a semantic version such as v0.3.0", *version)
	}
	targets, err := parseTargets(*targetList)
	if err != nil {
		return err
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "gateway-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	var sums strings.Builder
	for _, t := range targets {
		name := fmt.Sprintf("gateway_%s_%s_%s", *version, t.goos, t.goarch)
		exe := "gateway"
		if t.goos == "windows" {
			exe += ".exe"
		}
		bin := filepath.Join(work, name, exe)
		if err := build(ctx, root, t, *version, bin); err != nil {
			return err
		}
		files := []archived{{name + "/" + exe, bin, 0o755}, {name + "/LICENSE", filepath.Join(root, "LICENSE"), 0o644},
			{name + "/README.md", filepath.Join(root, "README.md"), 0o644}}
		archive := filepath.Join(*out, name+".tar.gz")
		write := writeTarGz
		if t.goos == "windows" {
			archive, write = filepath.Join(*out, name+".zip"), writeZip
		}
		if err := write(archive, files); err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
		sum, err := fileSHA256(archive)
		if err != nil {
			return err
		}
		fmt.Fprintf(&sums, "%s  %s\n", sum, filepath.Base(archive))
		fmt.Fprintf(stdout, "%s\t%s\n", t, archive)
	}
	sumsPath := filepath.Join(*out, "SHA256SUMS")
	if err := os.WriteFile(sumsPath, []byte(sums.String()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "checksums\t%s\n", sumsPath)
	return nil
}

func parseTargets(list string) ([]target, error) {
	var ts []target
	for p := range strings.SplitSeq(list, ",") {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || goos == "" || goarch == "" {
			return nil, fmt.Errorf("-targets: %q is not GOOS/GOARCH", p)
		}
		ts = append(ts, target{goos, goarch})
	}
	return ts, nil
}

// moduleRoot is the gateway module's directory, found from the working
// directory as the go command finds it.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("run release inside the gateway's repository")
	}
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if mod, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			if strings.TrimSpace(mod) != modulePath {
				return "", fmt.Errorf("%s is module %s, not %s: run release from the repository's root module", gomod, mod, modulePath)
			}
			return filepath.Dir(gomod), nil
		}
	}
	return "", fmt.Errorf("%s names no module", gomod)
}

// build compiles cmd/gateway for t with the version stamped.
func build(ctx context.Context, root string, t target, version, bin string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -X main.Version="+version, "-o", bin, "./cmd/gateway")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.goos, "GOARCH="+t.goarch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build for %s: %w\n%s", t, err, out)
	}
	return nil
}

// archived is one file of an archive: its name inside, where it is now,
// and its mode.
type archived struct {
	name, path string
	mode       int64
}

func writeTarGz(path string, files []archived) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	err = func() error {
		for _, a := range files {
			fi, err := os.Stat(a.path)
			if err != nil {
				return err
			}
			if err := tw.WriteHeader(&tar.Header{Name: a.name, Mode: a.mode, Size: fi.Size(), ModTime: fi.ModTime(), Typeflag: tar.TypeReg}); err != nil {
				return err
			}
			if err := copyFile(tw, a.path); err != nil {
				return err
			}
		}
		return nil
	}()
	return errors.Join(err, tw.Close(), gz.Close(), f.Close())
}

func writeZip(path string, files []archived) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(f)
	err = func() error {
		for _, a := range files {
			fi, err := os.Stat(a.path)
			if err != nil {
				return err
			}
			h, err := zip.FileInfoHeader(fi)
			if err != nil {
				return err
			}
			h.Name, h.Method = a.name, zip.Deflate
			w, err := zw.CreateHeader(h)
			if err != nil {
				return err
			}
			if err := copyFile(w, a.path); err != nil {
				return err
			}
		}
		return nil
	}()
	return errors.Join(err, zw.Close(), f.Close())
}

func copyFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
