// Command gateway runs replyonce gateway and its tools:
//
//	gateway serve   --config FILE     run the gateway
//	gateway check   --config FILE     validate a configuration and print its routes
//	gateway send    --config FILE --source NAME [--event-id ID] [--body FILE] [--to URL]
//	                [--conversation ID --message TEXT]
//	                                  sign a test event as the provider would and send it
//	gateway migrate --config FILE     create the Postgres schema (other stores need none)
//	gateway demo [--seed N] [--conversations N] [--store memory|bolt]
//	                                  simulated support conversations under injected faults
//	gateway bench [--store memory|bolt|postgres|redis] [--n N] [--concurrency C] [--duplicates F]
//	                                  measure the gateway against a bare reverse proxy
//	gateway version
//
// serve does not exit when its store is down at start: it listens, answers
// /readyz and webhooks 503, and retries the store with backoff
// (storewait.go), so an orchestrator sees an unready process rather than a
// crash loop.
//
// main is thin: everything runs through App.Run, which tests call directly
// with their own arguments, output, environment and clock.
package main
