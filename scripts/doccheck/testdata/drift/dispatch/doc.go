// Package dispatch delivers queued events. When every place is taken, an
// accept waits up to 50 ms (handoffWait) for one; the wait is acceptWait,
// read with time.ParseDuration.
//
// Names from elsewhere are not ours: GitHub and OpenAI are products, the
// event's "webhookId" is a JSON key, JavaScript's encodeURI is a function
// of another language, and
// owner/sdk src/webhooks.ts verifyWebhook
// cites another project's code. Doc links: [Place], [Place.Free],
// [time.Duration], [time.Durationn] and [Missing].
package dispatch

import "time"

const acceptWait = 50 * time.Millisecond

// Place is a request slot; queue.go has none of it.
type Place struct{ Free bool }
