package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/stores/internal/groupcommit"
)

// ReplicasError reports a write, or a read an answer rests on, that fewer
// replicas than Options.Replicas had acknowledged when the wait ended.
// The master has it; whether it survives a failover is not known, so the
// caller must not report it as done. It is a store failure, never a
// decision.
type ReplicasError struct {
	Want, Got int
	Timeout   time.Duration
}

func (e *ReplicasError) Error() string {
	return fmt.Sprintf("redis store: the write reached %d of %d %s within %s", e.Got, e.Want, plural(e.Want, "replica"), e.Timeout)
}

// Redis's WAIT blocks until the writes made on its own connection have
// reached the replicas. So with Options.Replicas set, a script and its WAIT
// travel in one pipeline on one connection to the master that holds the
// scope: go-redis's Cluster pipeline would send a keyless WAIT to any
// node. That is why these paths address a node's own client.

// nodeFor returns the client of the master that holds key.
func (s *Store) nodeFor(ctx context.Context, key string) (*goredis.Client, error) {
	switch c := s.client.(type) {
	case *goredis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("find the master for %s: %w", key, err)
		}
		return node, nil
	case *goredis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("replicas need a go-redis Client or ClusterClient, not %T", s.client)
}

// waitCmd queues the WAIT that follows the writes on p's connection. Its
// server-side timeout is the store's; the caller's context still ends the
// call sooner.
func (s *Store) waitCmd(ctx context.Context, p goredis.Pipeliner) *goredis.IntCmd {
	cmd := goredis.NewIntCmd(ctx, "wait", s.replicas, s.replicasTimeout.Milliseconds())
	_ = p.Process(ctx, cmd) // queued; its error is the reply's
	return cmd
}

// waited turns WAIT's answer into an error unless enough replicas had the
// writes.
func (s *Store) waited(cmd *goredis.IntCmd) error {
	n, err := cmd.Result()
	if err != nil {
		return fmt.Errorf("wait for replicas: %w", err)
	}
	if int(n) < s.replicas {
		return &ReplicasError{Want: s.replicas, Got: int(n), Timeout: s.replicasTimeout}
	}
	return nil
}

// runCASReplicated is runCAS followed, on the same connection, by WAIT.
func (s *Store) runCASReplicated(ctx context.Context, a casArgs) casReply {
	node, err := s.nodeFor(ctx, a.key)
	if err != nil {
		return casReply{err: err}
	}
	var script *goredis.Cmd
	var wait *goredis.IntCmd
	send := func(load bool) {
		_, _ = node.Pipelined(ctx, func(p goredis.Pipeliner) error {
			if load {
				script = casScript.Eval(ctx, p, a.keys(s), a.argv()...)
			} else {
				script = casScript.EvalSha(ctx, p, a.keys(s), a.argv()...)
			}
			wait = s.waitCmd(ctx, p)
			return nil
		})
	}
	send(false)
	if goredis.HasErrorPrefix(script.Err(), "NOSCRIPT") {
		send(true)
	}
	return s.replicatedReply(ctx, script, wait)
}

// runPipelineReplicated sends a batch as one pipeline per master, each
// ending with one WAIT that covers all of its scripts.
func (s *Store) runPipelineReplicated(ctx context.Context, batch []*groupcommit.Item[casArgs, casReply]) {
	byNode := map[*goredis.Client][]*groupcommit.Item[casArgs, casReply]{}
	var order []*goredis.Client
	for _, it := range batch {
		node, err := s.nodeFor(ctx, it.Write.key)
		if err != nil {
			it.Result = casReply{err: err}
			continue
		}
		if _, ok := byNode[node]; !ok {
			order = append(order, node)
		}
		byNode[node] = append(byNode[node], it)
	}
	for _, node := range order {
		items := byNode[node]
		cmds := make([]*goredis.Cmd, len(items))
		var wait *goredis.IntCmd
		_, _ = node.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, it := range items {
				cmds[i] = casScript.EvalSha(ctx, p, it.Write.keys(s), it.Write.argv()...)
			}
			wait = s.waitCmd(ctx, p)
			return nil
		})
		for i, it := range items {
			if goredis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
				it.Result = s.runCASReplicated(ctx, it.Write)
				continue
			}
			it.Result = s.replicatedReply(ctx, cmds[i], wait)
		}
	}
}

// replicatedReply is the script's reply, made an error when the script
// wrote but WAIT did not see enough replicas have it. A script that lost
// wrote nothing, and its reply stands.
func (s *Store) replicatedReply(ctx context.Context, script *goredis.Cmd, wait *goredis.IntCmd) casReply {
	r := parseCASReply(script)
	if r.err != nil {
		s.refreshClusterMap(ctx)
		return r
	}
	if !r.won {
		return r
	}
	if err := s.waited(wait); err != nil {
		return casReply{err: err}
	}
	return r
}

// confirmScript makes the replicas' copy of a document that an answer is
// about to rest on current, without changing it. It rewrites the token
// only if it is still the one read, and the rewrite travels the
// replication stream behind every earlier write of the scope, so the WAIT
// that follows on the same connection returns once the replicas have the
// document as read.
//
// KEYS[1] scope hash. ARGV[1] the token read ("" = no document).
// Reply: 1 the token is unchanged, 0 it is not (decide again).
var confirmScript = goredis.NewScript(`
local tok = redis.call('HGET', KEYS[1], 't') or ''
if tok ~= ARGV[1] then
  return 0
end
if tok ~= '' then
  redis.call('HSET', KEYS[1], 't', tok)
end
return 1
`)

// errChanged is confirm's "the document is no longer the one read".
var errChanged = errors.New("the document changed after it was read")

// confirm waits until Options.Replicas replicas hold the scope's document
// as it was read (token), or reports errChanged when it is no longer that
// document.
func (s *Store) confirm(ctx context.Context, key, token string) error {
	node, err := s.nodeFor(ctx, key)
	if err != nil {
		return err
	}
	var script *goredis.Cmd
	var wait *goredis.IntCmd
	send := func(load bool) {
		_, _ = node.Pipelined(ctx, func(p goredis.Pipeliner) error {
			if load {
				script = confirmScript.Eval(ctx, p, []string{key}, token)
			} else {
				script = confirmScript.EvalSha(ctx, p, []string{key}, token)
			}
			wait = s.waitCmd(ctx, p)
			return nil
		})
	}
	send(false)
	if goredis.HasErrorPrefix(script.Err(), "NOSCRIPT") {
		send(true)
	}
	same, err := script.Int()
	if err != nil {
		s.refreshClusterMap(ctx)
		return fmt.Errorf("confirm: %w", err)
	}
	if same == 0 {
		return errChanged
	}
	return s.waited(wait)
}
