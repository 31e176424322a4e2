// Package testservers starts throwaway Redis and PostgreSQL servers on
// loopback for the tests that need a topology of their own: a replica, a
// Sentinel, a Redis Cluster, a Postgres primary with a streaming standby.
// Failover tests kill, pause and restart these servers, which they must
// never do to a server someone else uses.
//
// Every server listens on 127.0.0.1 on ports drawn at random from the
// range in REPLYONCE_TEST_PORTS (default 17000-17999, "first-last"), each
// checked free before use and tried again when a server still fails to
// bind one, so two test runs on one machine do not collide. A server's
// files live in a directory of the caller's.
//
// Servers are child processes. The testing helpers (Redis, Cluster,
// Postgres, ...) stop them when the test ends and, with CI set, fail the
// test when redis-server or the PostgreSQL binaries are missing (without
// CI, they skip it). A server started with Detach outlives the program
// that started it, for a CI script that starts a cluster once for many
// test processes; Stop reads the pids it left behind.
//
// PostgreSQL refuses to run as root, so when the tests run as root the
// Postgres helpers run its binaries as the "postgres" user and give that
// user the data directory.
//
// It builds on Unix only (Linux, macOS, the BSDs): it runs the servers
// as Unix processes, pauses them with SIGSTOP and runs PostgreSQL under
// another user's credentials. The tests that use it build on Unix only
// too; on Windows they are not compiled.
package testservers
