package console

import (
	"strconv"
	"time"

	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// The event page's picture: the event's life on one time axis, from its
// receipt through every attempt (a mark coloured by outcome, as wide as
// the agent took) to its end or its next attempt due, with the wait
// before each attempt written under it. Drawn as SVG on the server.

const (
	pictureWidth = 640
	pictureLeft  = 10 // room for the first mark
	pictureRight = 10
)

// pictureMark is one point of the picture.
type pictureMark struct {
	N            int
	X, W         int // the attempt's start and width (its latency), in SVG units
	Class, Title string
	Wait         string // the wait before it, when there is room to say it
	WaitX        int
}

// picture is what event.html draws.
type picture struct {
	Marks           []pictureMark
	ReceivedX, EndX int
	End             string // "next attempt due", "finished", "now"
	EndClass        string
	From, To        string
	Span            string
}

// attemptPicture lays out d's attempts (oldest first) on one axis.
func attemptPicture(d ledgerapi.DeliveryItemJSON, attempts []ledgerapi.AttemptJSON, now time.Time) *picture {
	if len(attempts) == 0 {
		return nil
	}
	start := d.ReceivedAt
	end := attempts[len(attempts)-1].At.Add(time.Duration(attempts[len(attempts)-1].LatencyMs * float64(time.Millisecond)))
	p := &picture{End: "finished", EndClass: statusClass(d.Status)}
	switch {
	case !d.FinishedAt.IsZero():
		end = maxTime(end, d.FinishedAt)
	case d.Status == "queued" && !d.NextAt.IsZero():
		end, p.End, p.EndClass = maxTime(end, d.NextAt), "next attempt due", "st-wait"
	default:
		end, p.End, p.EndClass = maxTime(end, now), "now", "st-wait"
	}
	span := end.Sub(start)
	if span <= 0 {
		span = time.Millisecond
	}
	usable := pictureWidth - pictureLeft - pictureRight
	x := func(t time.Time) int {
		f := float64(t.Sub(start)) / float64(span)
		return pictureLeft + int(min(max(f, 0), 1)*float64(usable)+0.5)
	}
	p.ReceivedX, p.EndX = x(start), x(end)
	p.From, p.To, p.Span = stamp(start), stamp(end), roundSpan(span)
	prevX, prev := p.ReceivedX, start
	for _, a := range attempts {
		m := pictureMark{N: a.N, X: x(a.At), Class: statusClass(a.Outcome)}
		lat := time.Duration(a.LatencyMs * float64(time.Millisecond))
		m.W = max(3, x(a.At.Add(lat))-m.X)
		wait := a.At.Sub(prev)
		m.Title = "attempt " + strconv.Itoa(a.N) + ": " + a.Outcome
		if a.AgentStatus != 0 {
			m.Title += ", agent answered " + strconv.Itoa(a.AgentStatus)
		}
		m.Title += " at " + stamp(a.At) + ", after a wait of " + roundSpan(wait)
		if m.X-prevX >= 44 {
			m.Wait, m.WaitX = roundSpan(wait), (prevX+m.X)/2
		}
		p.Marks = append(p.Marks, m)
		prevX, prev = m.X+m.W, a.At.Add(lat)
	}
	return p
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// roundSpan writes a duration short: 850 ms, 1.2 s, 3 min 5 s, 2 h 10 min.
func roundSpan(d time.Duration) string {
	switch {
	case d < 0:
		return "0 ms"
	case d < time.Second:
		return strconv.Itoa(int(d.Milliseconds())) + " ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + " min " + strconv.Itoa(int(d.Seconds())%60) + " s"
	}
	return strconv.Itoa(int(d.Hours())) + " h " + strconv.Itoa(int(d.Minutes())%60) + " min"
}
