//go:build unix

package testservers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresBin finds the directory of the PostgreSQL server binaries
// (initdb, postgres, pg_basebackup): the newest /usr/lib/postgresql/*/bin,
// else the directory of the initdb on PATH.
func PostgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		return "", errors.New("no PostgreSQL server binaries: neither /usr/lib/postgresql/*/bin nor initdb on PATH")
	}
	if real, err := filepath.EvalSymlinks(initdb); err == nil {
		initdb = real
	}
	return filepath.Dir(initdb), nil
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// PostgresOptions shapes one PostgreSQL server.
type PostgresOptions struct {
	// Dir holds the data directory and the log; it is made readable to
	// the server's user.
	Dir string
	// Settings are more -c name=value settings.
	Settings map[string]string
}

// Postgres is one PostgreSQL server (a primary or a standby) with its own
// data directory.
type Postgres struct {
	*Process
	Data string // data directory

	bin      string
	settings map[string]string
	cred     *syscall.Credential
}

// DSN is a URL for database db as the superuser postgres.
func (p *Postgres) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", p.Addr(), db)
}

// serverUser is whom PostgreSQL runs as: the "postgres" user when this
// process is root (the server refuses root), else this process's user.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL refuses root: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// prepareDir makes dir and its parents traversable by the server's user
// and dir itself its own.
func prepareDir(dir string, cred *syscall.Credential) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if cred == nil {
		return nil
	}
	for d := filepath.Dir(dir); d != "/" && d != "."; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, st.Mode().Perm()|0o711); err != nil {
				return err
			}
		}
	}
	return os.Chown(dir, int(cred.Uid), int(cred.Gid))
}

// run runs one of the PostgreSQL programs to completion as the server's
// user.
func run(ctx context.Context, cred *syscall.Credential, bin string, args ...string) error {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return nil
}

// StartPostgres makes a fresh cluster with initdb (trust authentication
// on loopback, replication allowed) and starts it on a free port.
func StartPostgres(ctx context.Context, o PostgresOptions) (*Postgres, error) {
	bin, err := PostgresBin()
	if err != nil {
		return nil, err
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	base := filepath.Join(o.Dir, "postgres-primary")
	if err := prepareDir(base, cred); err != nil {
		return nil, err
	}
	data := filepath.Join(base, "data")
	if err := prepareDir(data, cred); err != nil {
		return nil, err
	}
	err = run(ctx, cred, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"--no-sync", "--no-instructions", "-E", "UTF8", "--locale=C")
	if err != nil {
		return nil, err
	}
	p := &Postgres{Data: data, bin: bin, settings: o.Settings, cred: cred}
	return p, p.startOnFreePort(ctx, base, "postgres primary")
}

func (p *Postgres) startOnFreePort(ctx context.Context, dir, name string) error {
	_, err := withFreePorts(1, func(ports []int) (struct{}, error) {
		return struct{}{}, p.startOn(ctx, dir, name, ports[0])
	})
	return err
}

// startOn starts the server in p.Data on port and waits until it accepts
// connections (a standby: read-only ones).
func (p *Postgres) startOn(ctx context.Context, dir, name string, port int) error {
	args := []string{"-D", p.Data, "-p", strconv.Itoa(port), "-k", "",
		"-c", "listen_addresses=127.0.0.1",
		// Small, and gentle with the shared machine's disk: a crash of the
		// process loses nothing the kernel already has.
		"-c", "shared_buffers=16MB", "-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "wal_level=replica", "-c", "max_wal_senders=5",
		"-c", "wal_keep_size=64MB", "-c", "logging_collector=off"}
	for k, v := range p.settings {
		args = append(args, "-c", k+"="+v)
	}
	proc, err := start(startOptions{name: name, dir: dir, bin: filepath.Join(p.bin, "postgres"), args: args, asUser: p.cred})
	if err != nil {
		return err
	}
	proc.Port = port
	p.Process = proc
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = waitUntil(wctx, proc, "accepting connections", func(ctx context.Context) error {
		c, err := pgx.Connect(ctx, p.DSN("postgres"))
		if err != nil {
			return err
		}
		return c.Close(ctx)
	})
	if err != nil {
		_ = proc.Kill()
		if strings.Contains(proc.Log(), "Address already in use") {
			return fmt.Errorf("%w: %v", errBind, err)
		}
		return err
	}
	return nil
}

// Stop shuts the server down: fast (SIGINT: sessions are ended, what was
// committed is kept) or, with immediate, as a crash would (SIGQUIT).
func (p *Postgres) Stop(immediate bool) error {
	sig := syscall.SIGINT
	if immediate {
		sig = syscall.SIGQUIT
	}
	return p.signalAndWait(sig, time.Minute)
}

// Start starts a stopped server again on its port, with its data.
func (p *Postgres) Start(ctx context.Context) error {
	if p.Running() {
		return fmt.Errorf("%s is running", p.Name)
	}
	return p.startOn(ctx, p.Dir, p.Name, p.Port)
}

// CreateDatabase creates database name.
func (p *Postgres) CreateDatabase(ctx context.Context, name string) error {
	c, err := pgx.Connect(ctx, p.DSN("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}

// StartStandby copies the primary with pg_basebackup -R (which writes the
// standby's connection to it) and starts the copy as a streaming standby
// on a free port. It waits until the primary sees the standby streaming.
func (p *Postgres) StartStandby(ctx context.Context, o PostgresOptions) (*Postgres, error) {
	base := filepath.Join(o.Dir, "postgres-standby")
	if err := prepareDir(base, p.cred); err != nil {
		return nil, err
	}
	data := filepath.Join(base, "data")
	err := run(ctx, p.cred, filepath.Join(p.bin, "pg_basebackup"), "-D", data, "-R", "-X", "stream",
		"-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", "postgres", "--no-sync", "-c", "fast",
		"-d", "application_name=standby")
	if err != nil {
		return nil, err
	}
	s := &Postgres{Data: data, bin: p.bin, settings: o.Settings, cred: p.cred}
	if err := s.startOnFreePort(ctx, base, "postgres standby"); err != nil {
		return nil, err
	}
	c, err := pgx.Connect(ctx, p.DSN("postgres"))
	if err != nil {
		return nil, err
	}
	defer c.Close(ctx)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = waitUntil(wctx, s.Process, "streaming from the primary", func(ctx context.Context) error {
		var n int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'").Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return errors.New("no standby streaming yet")
		}
		return nil
	})
	if err != nil {
		_ = s.Kill()
		return nil, err
	}
	return s, nil
}

// Promote makes a standby the primary and waits until it accepts writes.
func (p *Postgres) Promote(ctx context.Context) error {
	c, err := pgx.Connect(ctx, p.DSN("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	var done bool
	if err := c.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&done); err != nil {
		return fmt.Errorf("promote %s: %w", p.Name, err)
	}
	if !done {
		return fmt.Errorf("promote %s: not promoted within 60s", p.Name)
	}
	return nil
}
