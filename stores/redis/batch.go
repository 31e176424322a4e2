package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/internal/groupcommit"
)

const (
	// DefaultMaxBatch is how many compare-and-set scripts one pipeline
	// carries at most when Options.MaxBatch is zero.
	DefaultMaxBatch = 64

	// pipelinesInFlight bounds the round trips one Store has in flight at
	// once, single scripts and pipelines together. Past it, writes queue
	// and leave together in the next pipeline. At 16 and 64 goroutines, 4
	// did as well as or better than 1 and 2 (BenchmarkClaimSettle).
	pipelinesInFlight = 4
)

// batcher sends concurrent compare-and-set scripts in pipelines: one write
// and one read on the connection, for the client and for the server,
// instead of one each per script. Redis still runs every script on its
// own, atomically and in order, so a pipeline changes nothing about what
// each write decides; it is not a transaction, and each script answers for
// itself. It follows groupcommit's rules: a write that finds nothing
// queued and a round trip free is sent at once; the others leave together
// as soon as a round trip is free.
type batcher = groupcommit.Batcher[casArgs, casReply]

func newBatcher(s *Store, maxBatch, maxInflight int) *batcher {
	alone, send := s.runCAS, s.runPipeline
	if s.replicas > 0 {
		alone, send = s.runCASReplicated, s.runPipelineReplicated
	}
	return groupcommit.New(groupcommit.Options{MaxBatch: maxBatch, MaxInflight: maxInflight},
		alone, send, func(err error) casReply { return casReply{err: err} }, nil)
}

// runPipeline sends the batch's scripts in one pipeline and records each
// one's reply. Scripts the server did not know (NOSCRIPT: not run) are
// sent again one by one, which loads the script.
func (s *Store) runPipeline(ctx context.Context, batch []*groupcommit.Item[casArgs, casReply]) {
	cmds := make([]*goredis.Cmd, len(batch))
	// Pipelined's own error repeats the first command's; each command's
	// error is read below.
	_, _ = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, it := range batch {
			cmds[i] = casScript.EvalSha(ctx, p, it.Write.keys(s), it.Write.argv()...)
		}
		return nil
	})
	for i, it := range batch {
		if goredis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			it.Result = s.runCAS(ctx, it.Write)
			continue
		}
		it.Result = parseCASReply(cmds[i])
	}
}

// casArgs is one run of the write script.
type casArgs struct {
	scope, key   string
	expect, next string
	w            *ledger.Write
}

func (a casArgs) keys(s *Store) []string {
	b := bucketOf(a.scope)
	return []string{a.key, s.indexKey(b), s.dueKeys[b], s.blobKey(a.scope), s.receivedKeys[b]}
}

func (a casArgs) argv() []any {
	ttl := "0"
	if a.w.TTL != 0 {
		// Sub-millisecond and negative TTLs round up to the smallest
		// expiry Redis has: keeping a document longer is allowed.
		ttl = strconv.FormatInt(max(a.w.TTL.Milliseconds(), 1), 10)
	}
	review := ""
	if !a.w.ReviewAt.IsZero() {
		review = strconv.FormatInt(a.w.ReviewAt.UnixMilli(), 10)
	}
	due := ""
	if !a.w.DueAt.IsZero() {
		due = strconv.FormatInt(a.w.DueAt.UnixMilli(), 10)
	}
	args := make([]any, 0, 10+2*len(a.w.Blobs)+len(a.w.Absent))
	args = append(args, a.expect, a.next, a.w.Doc, ttl, review, a.scope, due, 0, len(a.w.Absent))
	puts := 0
	for name, b := range a.w.Blobs {
		if b != nil {
			args = append(args, name, b)
			puts++
		}
	}
	args[7] = puts
	for _, name := range a.w.Absent {
		args = append(args, name)
	}
	for name, b := range a.w.Blobs {
		if b == nil {
			args = append(args, name)
		}
	}
	received := ""
	if !a.w.ReceivedAt.IsZero() {
		received = strconv.FormatInt(a.w.ReceivedAt.UnixMilli(), 10)
	}
	return append(args, received)
}

// casReply is what the write script answered: won, or lost with the
// current token and document ("" and nil: no document), or refused because
// blobs it took as absent exist (present), or an error after which the
// write may or may not have landed.
type casReply struct {
	won     bool
	token   string
	doc     []byte
	present map[string][]byte
	err     error
}

// runCAS runs the write script alone, with EVALSHA and, when the server
// does not know the script, EVAL.
func (s *Store) runCAS(ctx context.Context, a casArgs) casReply {
	return parseCASReply(casScript.Run(ctx, s.client, a.keys(s), a.argv()...))
}

func parseCASReply(cmd *goredis.Cmd) casReply {
	reply, err := cmd.Slice()
	if err != nil {
		return casReply{err: err}
	}
	if len(reply) == 0 {
		return casReply{err: errors.New("empty reply from compare-and-set script")}
	}
	status, ok := reply[0].(int64)
	if !ok {
		return casReply{err: fmt.Errorf("compare-and-set script: unexpected status %T", reply[0])}
	}
	if status == 1 {
		return casReply{won: true}
	}
	if status == 2 {
		present := make(map[string][]byte, (len(reply)-1)/2)
		for j := 1; j+1 < len(reply); j += 2 {
			n, ok1 := reply[j].(string)
			d, ok2 := reply[j+1].(string)
			if !ok1 || !ok2 {
				return casReply{err: fmt.Errorf("compare-and-set script: unexpected blob in reply %T, %T", reply[j], reply[j+1])}
			}
			present[n] = []byte(d)
		}
		return casReply{present: present}
	}
	if len(reply) < 3 {
		return casReply{} // no document
	}
	t, ok1 := reply[1].(string)
	d, ok2 := reply[2].(string)
	if !ok1 || !ok2 {
		return casReply{err: fmt.Errorf("compare-and-set script: unexpected reply %T, %T", reply[1], reply[2])}
	}
	return casReply{token: t, doc: []byte(d)}
}
