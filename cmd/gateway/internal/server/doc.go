// Package server builds the running gateway from its parts: on an open
// store, the ledger (with the loop breaker's metrics), the forwarder, the
// dispatcher of queued sources, the alert notifier, the public webhook
// handler (ingress.Gateway) and the admin handler (the ledger API, the
// sources' health, the console, /metrics, /healthz and /readyz).
//
// `gateway serve` and `gateway bench` both build the gateway here, so the
// bench measures what serve runs, and the end-to-end tests, which run
// serve, test it. What is a process's business stays with the caller:
// opening the store, logging, tracing, listeners, TLS and the host guard.
// The order they stop in on SIGTERM is the server's: serve hands them to
// Stop (see Process), which stops intake, drains, stops the dispatcher,
// the admin listener, the store and tracing, in that order.
//
// # What it promises
//
//   - New builds everything or nothing: on an error nothing is left
//     running. Run dispatches until its context ends; Shutdown then gives
//     the deliveries in flight until its own context's deadline (a cut one
//     is left due), and Close stops the alert notifier. Every goroutine
//     New or Run starts has ended when Close returns. Stop does all of
//     that, and the process's part, in the order its documentation
//     gives.
//   - One registry holds every metric of the gateway, so /metrics shows
//     the webhook handler's, the dispatcher's, the loop breaker's and the
//     sources' health (read from the store at each scrape).
//   - /readyz answers 503 from Stopping on, and while the store cannot be
//     read; it says only that, the error goes to the log.
package server
