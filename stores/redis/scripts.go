package redis

import goredis "github.com/redis/go-redis/v9"

// casScript is the only way a document changes. It compares the scope's
// version token with the one the caller's decision was based on and, when
// they match, stores the new document and its expiry in one atomic step,
// keeping the bucket's review index in step with it (the review time lives
// only there). Both keys carry the same hash tag, so the script is legal on
// Redis Cluster. The document is read only on a conflict, to hand back.
//
// Replies:
//
//	{1}            written (or already written by this very attempt)
//	{0}            conflict: the scope has no document
//	{0, tok, doc}  conflict: the current token and document, so the caller
//	               can decide again without another round trip
//
// Absent values are encoded by the reply's length, never by Lua false, which
// reaches RESP3 clients as a boolean rather than a nil.
//
// The due index works like the review index. The scope's blobs live in a
// hash of their own (same hash tag) that expires with the document: every
// write gives it the document's TTL, and a document created afresh starts
// with no blobs.
//
// KEYS[1] scope hash, KEYS[2] review index of the scope's bucket, KEYS[3]
// due index of the bucket, KEYS[4] the scope's blob hash, KEYS[5] received
// index of the bucket.
// ARGV[1] expected token ("" = no document), ARGV[2] new token, ARGV[3] doc,
// ARGV[4] TTL in ms ("0" = no expiry), ARGV[5] review time in unix ms
// ("" = none), ARGV[6] scope (the index member), ARGV[7] due time in unix
// ms ("" = none), ARGV[8] n, the number of blobs to put; then n name, data
// pairs; then the names of blobs to delete; last, the received time in
// unix ms ("" = none), kept like the due time in KEYS[5].
var casScript = goredis.NewScript(`
local tok = redis.call('HGET', KEYS[1], 't') or ''
if tok ~= ARGV[1] then
  if tok == ARGV[2] then
    -- A client-side retry of an attempt that already landed: the token is
    -- fresh per attempt, so nobody else can have written it. Writing it
    -- again (a no-op) puts it behind this connection's WAIT, if one follows.
    redis.call('HSET', KEYS[1], 't', tok)
    return {1}
  end
  if tok == '' then
    return {0}
  end
  return {0, tok, redis.call('HGET', KEYS[1], 'd') or ''}
end
redis.call('HSET', KEYS[1], 't', ARGV[2], 'd', ARGV[3])
if ARGV[5] == '' then
  redis.call('ZREM', KEYS[2], ARGV[6])
else
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[6])
end
if ARGV[7] == '' then
  redis.call('ZREM', KEYS[3], ARGV[6])
else
  redis.call('ZADD', KEYS[3], ARGV[7], ARGV[6])
end
if tok == '' then
  redis.call('DEL', KEYS[4])
end
local puts = tonumber(ARGV[8])
local i = 9
for _ = 1, puts do
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
  i = i + 2
end
while i < #ARGV do
  redis.call('HDEL', KEYS[4], ARGV[i])
  i = i + 1
end
if ARGV[#ARGV] == '' then
  redis.call('ZREM', KEYS[5], ARGV[6])
else
  redis.call('ZADD', KEYS[5], ARGV[#ARGV], ARGV[6])
end
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[4], ttl)
else
  redis.call('PERSIST', KEYS[1])
  redis.call('PERSIST', KEYS[4])
end
return {1}
`)

// pruneScript drops an index entry (review or due) whose document has gone (expired or
// deleted by hand). Checking and removing in one step means a writer that
// recreates the document at the same moment cannot lose its fresh entry.
//
// KEYS[1] review index, KEYS[2] scope hash (same slot). ARGV[1] scope.
var pruneScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 0 then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
`)
