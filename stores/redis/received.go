package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/ledger"
)

// ScopesReceived implements ledger.Store over the per-bucket received
// indexes (sorted sets scored by unix ms, in each bucket's slot like the
// due index): every bucket's newest entries before the cursor in one
// pipelined round trip, merged newest first, then the winners checked as
// ScopesToReview does (the document exists and the index holds it). Within one millisecond a sorted set orders
// members by bytes, which is the order the cursor's scope tie-break uses.
func (s *Store) ScopesReceived(ctx context.Context, before ledger.ScopeAt, limit int) ([]ledger.ScopeAt, error) {
	if limit <= 0 {
		return nil, nil
	}
	for round := 0; ; round++ {
		cands, err := s.receivedCandidates(ctx, before, limit)
		if err != nil {
			return nil, s.failed(fmt.Errorf("redis store: scopes received: %w", err))
		}
		held, err := s.heldIn(ctx, cands, inReceived)
		if err != nil {
			return nil, s.failed(fmt.Errorf("redis store: scopes received: %w", err))
		}
		out := make([]ledger.ScopeAt, 0, len(cands))
		var gone []string
		for i, c := range cands {
			if held[i] {
				out = append(out, ledger.ScopeAt{Scope: c.scope, At: time.UnixMilli(int64(c.at)).UTC()})
			} else {
				gone = append(gone, c.scope)
			}
		}
		if len(gone) == 0 || round == maxPruneRounds {
			return out, nil
		}
		for _, scope := range gone {
			err := pruneScript.Run(ctx, s.client, []string{s.receivedKeys[bucketOf(scope)], s.docKey(scope)}, scope, inReceived).Err()
			if err != nil {
				return nil, s.failed(fmt.Errorf("redis store: scopes received: prune %q: %w", scope, err))
			}
		}
	}
}

// receivedCandidates merges the buckets' entries strictly before the
// cursor, newest first, up to limit. A bucket's entries in the cursor's own
// millisecond with a scope not before the cursor's are skipped; when that
// left a full answer short, the bucket is asked again for more.
func (s *Store) receivedCandidates(ctx context.Context, before ledger.ScopeAt, limit int) ([]candidate, error) {
	top, atMs := "+inf", float64(0)
	if !before.At.IsZero() {
		atMs = float64(before.At.UnixMilli())
		top = strconv.FormatInt(before.At.UnixMilli(), 10)
	}
	ask := func(p goredis.Cmdable, b, count int) *goredis.ZSliceCmd {
		return p.ZRangeArgsWithScores(ctx, goredis.ZRangeArgs{Key: s.receivedKeys[b], ByScore: true, Rev: true,
			Start: top, Stop: "-inf", Count: int64(count)})
	}
	cmds := make([]*goredis.ZSliceCmd, reviewBuckets)
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for b := range reviewBuckets {
			cmds[b] = ask(p, b, limit)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var all []candidate
	for b, cmd := range cmds {
		count := limit
		for {
			zs, skipped := cmd.Val(), 0
			var got []candidate
			for _, z := range zs {
				scope, ok := z.Member.(string)
				if !ok {
					return nil, fmt.Errorf("received index member of type %T", z.Member)
				}
				if !before.At.IsZero() && z.Score == atMs && scope >= before.Scope {
					skipped++
					continue
				}
				got = append(got, candidate{scope: scope, at: z.Score})
			}
			if len(got) >= limit || len(zs) < count {
				all = append(all, got...)
				break
			}
			count = limit + skipped
			if cmd = ask(s.client, b, count); cmd.Err() != nil {
				return nil, cmd.Err()
			}
		}
	}
	slices.SortFunc(all, func(a, b candidate) int {
		if a.at != b.at {
			if a.at > b.at {
				return -1
			}
			return 1
		}
		return -strings.Compare(a.scope, b.scope)
	})
	if len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}
