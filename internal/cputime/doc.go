// Package cputime reads how much CPU time this process has used, user and
// system together, for the benchmarks and the bench command, which report
// CPU per request beside wall time: on a shared machine CPU varies far
// less than wall time does.
//
// It promises a figure from the operating system's own account where the
// platform keeps one (getrusage on Linux, macOS and the BSDs;
// GetProcessTimes on Windows) and, everywhere else, an honest "not
// measured" (ok false) rather than a zero that would read as free.
//
// RedisServer reads a Redis server's CPU from its INFO answer, for the
// benchmarks that price the work a store moved out of this process; it
// lives here, not in the Redis store, which has no use for it.
package cputime
