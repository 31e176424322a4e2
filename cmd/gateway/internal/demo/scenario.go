package demo

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Fault rates. Conversation faults are decided once per conversation; send
// faults once per attempt to send a reply.
const (
	pDuplicate = 0.15
	pBurst     = 0.20

	pCrash         = 0.08
	pTimeoutBefore = 0.08
	pTimeoutAfter  = 0.10

	// sendFaultBudget caps the send faults one conversation suffers. The
	// ledger allows three attempts known not to have happened per reply;
	// two faults leave room for one clean attempt, so no message is lost to
	// bad luck alone.
	sendFaultBudget = 2
)

// point is a moment inside the agent's handling of a delivery where the
// outside world can barge in.
type point int

const (
	// pointRead: the agent has read the conversation and decided what to
	// answer, and has not claimed or sent anything yet.
	pointRead point = iota
	// pointSend: the agent is about to call the chat API; behind the gateway
	// its claim on the reply has been granted.
	pointSend
)

type duplicateTiming int

const (
	noDuplicate duplicateTiming = iota
	// duplicateWhileAnswering: the second copy arrives while the agent is
	// still answering the first.
	duplicateWhileAnswering
	// duplicateLater: the second copy arrives after a delay.
	duplicateLater
)

// scenario is what happens to one conversation, decided before either run
// so that both runs face the same conversation faults.
type scenario struct {
	conv      string
	text      string
	duplicate duplicateTiming
	dupDelay  time.Duration
	burst     bool
	burstAt   point
	burstText string
}

// streamScenario and streamFaults keep the scenario and the send-fault dice of one
// conversation on separate PCG streams, so that how many random numbers one
// consumes never shifts the other.
const (
	streamScenario uint64 = 0x5ce7a410
	streamFaults   uint64 = 0xfa017500
)

var openers = [...]string{
	"Hi, my order has not arrived yet.",
	"I was charged twice this month.",
	"How do I change my delivery address?",
	"The app logs me out every few minutes.",
	"Can I get a refund for the broken charger?",
	"My discount code is not accepted at checkout.",
}

var followUps = [...]string{
	"Also, it is order A-1001.",
	"Sorry, one more thing: I need it by Friday.",
	"Never mind the address, I moved it myself. Still missing the order though.",
	"Hello? Anyone there?",
}

func newScenario(seed uint64, i int) scenario {
	r := rand.New(rand.NewPCG(seed, streamScenario^uint64(i)))
	sc := scenario{conv: fmt.Sprintf("c%03d", i+1), text: openers[r.IntN(len(openers))], duplicate: noDuplicate}
	if r.Float64() < pDuplicate {
		sc.duplicate = duplicateWhileAnswering
		if r.IntN(2) == 0 {
			sc.duplicate = duplicateLater
			sc.dupDelay = time.Duration(1+r.IntN(90)) * time.Second
		}
	}
	if r.Float64() < pBurst {
		sc.burst = true
		sc.burstAt = point(r.IntN(2))
		sc.burstText = followUps[r.IntN(len(followUps))]
	}
	return sc
}

// Faults counts the faults injected in one run.
type Faults struct {
	WorkerCrash       int
	DuplicateDelivery int
	CustomerBurst     int
	TimeoutBeforeSend int
	TimeoutAfterSend  int
}

func (f Faults) String() string {
	return fmt.Sprintf("worker_crash=%d duplicate_delivery=%d customer_burst=%d timeout_before_send=%d timeout_after_send=%d",
		f.WorkerCrash, f.DuplicateDelivery, f.CustomerBurst, f.TimeoutBeforeSend, f.TimeoutAfterSend)
}

// dice decides the send faults of one conversation in one run.
type dice struct {
	r      *rand.Rand
	budget int
	counts *Faults
}

func newDice(seed uint64, i int, counts *Faults) *dice {
	return &dice{r: rand.New(rand.NewPCG(seed, streamFaults^uint64(i))), budget: sendFaultBudget, counts: counts}
}

// sendFault rolls for one attempt to send a reply.
func (d *dice) sendFault() sendFault {
	u := d.r.Float64()
	if d.budget == 0 {
		return sendOK
	}
	f := sendOK
	switch {
	case u < pCrash:
		d.counts.WorkerCrash++
		f = crashBeforeSend
		if d.r.IntN(2) == 0 {
			f = crashAfterSend
		}
	case u < pCrash+pTimeoutBefore:
		d.counts.TimeoutBeforeSend++
		f = timeoutBeforeSend
	case u < pCrash+pTimeoutBefore+pTimeoutAfter:
		d.counts.TimeoutAfterSend++
		f = timeoutAfterSend
	}
	if f != sendOK {
		d.budget--
	}
	return f
}

// hooks are the conversation faults waiting for their moment: each runs
// once, the first time the agent reaches its point while handling its
// message.
type hooks struct {
	waiting map[hookKey][]func()
}

type hookKey struct {
	at  point
	msg string
}

func (h *hooks) add(at point, msg string, f func()) {
	if h.waiting == nil {
		h.waiting = map[hookKey][]func(){}
	}
	k := hookKey{at, msg}
	h.waiting[k] = append(h.waiting[k], f)
}

func (h *hooks) fire(at point, msg string) {
	k := hookKey{at, msg}
	fs := h.waiting[k]
	delete(h.waiting, k)
	for _, f := range fs {
		f()
	}
}
