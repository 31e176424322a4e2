package dispatch

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A job never waits behind another: every place the dispatcher holds
// delivers at once, however many are busy.
func TestWorkersRunEveryJobAtOnce(t *testing.T) {
	w := newWorkers(time.Minute)
	const n = 20
	var started sync.WaitGroup
	started.Add(n)
	release := make(chan struct{})
	var finished atomic.Int32
	waitOrFail(t, "every job to start while the others are still running", func() {
		for range n {
			w.run(func() {
				started.Done()
				<-release
				finished.Add(1)
			})
		}
		started.Wait()
	})
	close(release)
	w.stop()
	if got := finished.Load(); got != n {
		t.Fatalf("%d jobs finished before stop returned, want %d", got, n)
	}
}

// A worker that finished its job waits for the next one instead of exiting.
func TestWorkersTakeTheNextJobWhenIdle(t *testing.T) {
	w := newWorkers(time.Minute)
	defer w.stop()
	first := make(chan struct{})
	w.run(func() { close(first) })
	<-first
	second := make(chan struct{})
	select {
	case w.jobs <- func() { close(second) }: // only an idle worker receives
	case <-time.After(10 * time.Second):
		t.Fatal("no idle worker took a second job")
	}
	<-second
}

// An idle worker exits after its idle time without being stopped, so a
// burst of deliveries leaves no goroutines behind.
func TestWorkersExitWhenIdle(t *testing.T) {
	w := newWorkers(10 * time.Millisecond)
	for range 5 {
		w.run(func() {})
	}
	waitOrFail(t, "the idle workers to exit", w.wg.Wait)
}

// stop waits for a job in flight.
func TestWorkersStopWaitsForTheJobInFlight(t *testing.T) {
	w := newWorkers(time.Minute)
	release := make(chan struct{})
	var done atomic.Bool
	w.run(func() {
		<-release
		done.Store(true)
	})
	stopped := make(chan struct{})
	go func() {
		w.stop()
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("stop returned while a job was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-stopped
	if !done.Load() {
		t.Fatal("stop returned before the job finished")
	}
}

func waitOrFail(t *testing.T, what string, wait func()) {
	t.Helper()
	ch := make(chan struct{})
	go func() {
		wait()
		close(ch)
	}()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}
