// Package testkit holds the test helpers the packages' tests share, so that
// each exists once: a manual clock, and a poll with a deadline.
//
// Tests wait for behaviour, never for a span of time: Eventually polls a
// condition until it holds and fails the test, naming what it waited for,
// when a deadline passes. The deadline is reached only when the code under
// test is broken, so it is generous and is no timed assertion.
package testkit
