package dispatch

import (
	"sync"
	"time"
)

// workerIdle is how long a worker waits for its next job before it exits.
const workerIdle = 30 * time.Second

// workers runs the dispatcher's takes and deliveries on goroutines that
// outlive one job. A delivery runs deep (the ledger's codec, the HTTP
// client, the log): a goroutine started for each one grows its stack from
// the minimum and copies it a few times on the way, which the queued
// bench's profile put at about 4 % of the gateway's CPU per event, where an
// inline event's forward runs on its connection's goroutine, long grown
// (issue #29). A worker left idle for workerIdle exits, so a burst leaves
// no goroutines behind; stop ends the idle ones and waits for all.
type workers struct {
	jobs     chan func() // unbuffered: a send succeeds only into an idle worker
	quit     chan struct{}
	quitOnce sync.Once
	wg       sync.WaitGroup
	idle     time.Duration
}

func newWorkers(idle time.Duration) *workers {
	return &workers{jobs: make(chan func()), quit: make(chan struct{}), idle: idle}
}

// run starts job on an idle worker, or on a new one when none is idle. It
// never waits: the dispatcher's places (holds) bound its jobs, at most two
// per place (a take and its event's read), and so the workers.
func (w *workers) run(job func()) {
	select {
	case w.jobs <- job:
		return
	default:
	}
	w.wg.Add(1)
	go w.work(job)
}

func (w *workers) work(job func()) {
	defer w.wg.Done()
	timer := time.NewTimer(w.idle)
	defer timer.Stop()
	for {
		job()
		timer.Reset(w.idle)
		select {
		case job = <-w.jobs:
		case <-timer.C:
			return
		case <-w.quit:
			return
		}
	}
}

// stop ends the workers as they become idle and waits for them. No job
// may be run after it: the dispatcher calls it once every place is free.
func (w *workers) stop() {
	w.quitOnce.Do(func() { close(w.quit) })
	w.wg.Wait()
}
