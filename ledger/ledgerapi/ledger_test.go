package ledgerapi_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// supportAgent is agent logic written once against ledgerapi.Ledger.
type supportAgent struct {
	l       ledgerapi.Ledger
	replies map[string]int // customer message → replies sent
}

func (a *supportAgent) handle(ctx context.Context, conv, msgID string, contextAt time.Time) (ledgerapi.RunHandle, string, error) {
	run, err := a.l.Begin(ctx, conv, ledger.RunOptions{RunID: msgID, ContextAt: contextAt})
	if err != nil {
		return nil, "", err
	}
	res, err := a.reply(ctx, run, msgID)
	return run, res, err
}

func (a *supportAgent) reply(ctx context.Context, run ledgerapi.RunHandle, msgID string) (string, error) {
	res, err := run.Once(ctx, "reply", map[string]string{"to": msgID}, func(context.Context, ledger.Call) (any, error) {
		a.replies[msgID]++
		return map[string]string{"reply_to": msgID}, nil
	}, ledger.OnceOptions{Conflict: ledger.ConflictSameIntent})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s %s", res.Status, res.Reason, res.Value), nil
}

// script drives the agent through redeliveries and a newer message, and
// records every outcome.
func script(t *testing.T, l ledgerapi.Ledger, clock *clock) ([]string, map[string]int) {
	t.Helper()
	ctx := context.Background()
	a := &supportAgent{l: l, replies: map[string]int{}}
	var log []string
	must := func(s string, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, s)
	}
	t0 := clock.Now()
	first, out, err := a.handle(ctx, "conv", "m1", t0)
	must(out, err)
	// The same message delivered again resumes the run and replays.
	_, out, err = a.handle(ctx, "conv", "m1", t0)
	must(out, err)
	// The first delivery, now stale, tries another write.
	must(a.reply(ctx, first, "m1-followup"))
	clock.Advance(time.Second)
	// A second message starts a newer run; the old run is superseded.
	_, out, err = a.handle(ctx, "conv", "m2", clock.Now())
	must(out, err)
	ok, err := first.Heartbeat(ctx)
	must(fmt.Sprint("heartbeat ", ok), err)
	chk, err := l.Check(ctx, ledger.Key{Scope: "conv", Intent: "reply", Payload: map[string]string{"to": "m2"}})
	must(fmt.Sprint("check ", chk.Done, " ", chk.Status), err)
	h, err := l.History(ctx, "conv")
	must(fmt.Sprint("history ", len(h)), err)
	return log, a.replies
}

func TestSameAgentLogicInProcessAndRemote(t *testing.T) {
	local := newEnv(t, nil)
	remote := newEnv(t, nil)
	logLocal, repliesLocal := script(t, ledgerapi.InProcess(local.ledger), local.clock)
	logRemote, repliesRemote := script(t, ledgerapi.Remote(remote.client), remote.clock)

	want := []string{
		`executed  {"reply_to":"m1"}`,
		`replayed  {"reply_to":"m1"}`,
		`refused superseded `,
		`executed  {"reply_to":"m2"}`,
		`heartbeat false`,
		`check true replayed`,
		`history 2`,
	}
	if !reflect.DeepEqual(logLocal, want) {
		t.Errorf("in process:\n got %q\nwant %q", logLocal, want)
	}
	if !reflect.DeepEqual(logRemote, logLocal) {
		t.Errorf("remote differs from in process:\nremote %q\nlocal  %q", logRemote, logLocal)
	}
	if !reflect.DeepEqual(repliesLocal, map[string]int{"m1": 1, "m2": 1}) || !reflect.DeepEqual(repliesRemote, repliesLocal) {
		t.Errorf("replies: local %v remote %v", repliesLocal, repliesRemote)
	}
}
