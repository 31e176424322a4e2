// Package bench is the engine behind `gateway bench`: a side-by-side
// measurement of the real gateway against a bare reverse proxy, on loopback,
// in one run on one machine, so that every figure it prints is a ratio
// against a baseline that saw the same traffic under the same load.
//
// # What one run does
//
// It starts, on 127.0.0.1 with real TCP listeners and real http.Servers:
//
//   - a sink agent that answers 200 and counts the forwards it gets per
//     event id;
//   - the gateway: the real ingress handler with the chosen store (memory,
//     bolt with fsync on, postgres with synchronous_commit forced on for its
//     sessions, redis), the real forwarder and Prometheus metrics, and a zap
//     JSON logger at info level writing to /dev/null by default (one write(2)
//     per request, as in production; --log none measures without it);
//   - the baseline: echo v4 routing /hooks/:source to an
//     httputil.ReverseProxy (what echo's middleware.Proxy runs underneath)
//     to the same sink. It neither reads, verifies nor deduplicates; the body
//     streams through. It is given a transport pooled like the gateway's
//     forward client: the default (http.DefaultTransport, two idle
//     connections per host) would churn connections at 64 senders and
//     flatter the gateway.
//
// Then, for each repeat, it sends the same traffic through five passes:
// direct to the sink (calibration), through the baseline and through the
// gateway at full speed (closed loop: Concurrency senders, each sending as
// soon as its previous answer is in), and through the baseline and the
// gateway again at a fixed offered rate, half the gateway's measured peak
// by default (open loop: request i is due at i/rate; latency is measured
// from when it was due, so a stalled server is not hidden by senders that
// wait for it).
//
// The passes that are compared run interleaved, in slices (2000 requests by
// default): direct, baseline, gateway, then baseline, gateway, direct, and
// so on. The machine this runs on is shared; its background load changes
// over seconds, and passes run one after the other would each meet a
// different machine. Interleaved, they meet the same mix of it. The report
// also gives the ratio of each back-to-back slice pair, whose spread shows
// how noisy the machine was, and the ratio of CPU per request, which does
// not depend on how much of the machine the process got.
//
// # Traffic
//
// Every request is a signed event (Stripe or Standard Webhooks), signed
// before the pass starts so the signing cost stays out of the measurement.
// A fraction Duplicates of the requests are redeliveries: the same bytes and
// signature as an event whose first delivery has already been answered,
// which is how a provider retries after a lost answer. Redeliveries are
// picked among completed events so that they are answered "duplicate"; the
// race between concurrent identical deliveries is covered by the stores'
// conformance suite and the end-to-end tests, not here. The first few slots
// that would be redeliveries before anything has completed send a new event
// instead; the report counts both.
//
// # CPU
//
// CPU is process CPU time (user plus system: getrusage on Linux and macOS,
// GetProcessTimes on Windows) over a pass, divided by its requests. Where
// the platform gives no CPU time the report says "not measured" and prints
// "-" for every CPU figure and ratio. The load generator and the sink run in this process too,
// so the report gives the raw figure and a net one: the raw figure minus the
// calibration pass's, which is the same generator sending the same requests
// straight to the sink. What is left is the CPU the middle box (gateway or
// proxy) adds per request, its server side and its client side to the
// agent together. For the gateway this slightly understates, by the sink's
// cost for each redelivery that it did not forward. Work done inside
// PostgreSQL or Redis is not in this process and is not counted there; the
// store table reports it separately, per gateway request, as the store
// server's CPU over the pass: Redis's own INFO cpu, and for PostgreSQL, when
// the server runs on this host, the postmaster's and its children's CPU
// read from /proc (the notes line says which, or why not). On a machine
// whose cores the server shares with the bench, process CPU plus server CPU
// is what a request costs.
//
// # Time in the store
//
// For the gateway passes (full speed and half load) the report also says how
// long requests waited on the ledger store: the store the gateway is given
// is wrapped so that the wall time of every Transact and Read is taken,
// failed ones included, and the call is charged to its request through the
// request's context. The figures are store calls per request, the p50 and
// p99 of one call, and the p50 and p99 of one request's calls summed (a
// request turned away before the ledger counts as zero). A Transact's time
// includes the ledger's decision, which runs inside it, and an optimistic
// store's retries. Warm-ups are not counted. Taking the figures costs the
// gateway passes two clock reads per call and a few small allocations per
// request, which the baseline does not pay.
//
// # What it checks
//
// A gateway pass fails the run unless every unique event reached the sink
// exactly once (forwards per unique event exactly 1.00, none missing, none
// twice) and every request was answered 2xx. The baseline's forwards per
// unique event are reported too: they show what the gateway prevents.
package bench
