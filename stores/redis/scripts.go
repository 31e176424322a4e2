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
// The hash's field x records which indexes the write left the scope in and
// whether the blob hash may exist, under the write's token, so that the
// next write removes the scope only from an index that holds it and
// leaves alone a blob hash that does not exist (issue #29: those were most
// of a step's commands). Nothing else adds to the indexes or the blob
// hash, so x is exact while its token is the document's; a document
// created afresh, or last written by a script that kept no x (an older
// gateway's), clears everything as before.
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
local cur = redis.call('HMGET', KEYS[1], 't', 'x')
local tok = cur[1] or ''
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
-- held: what the write that set tok left behind, as it recorded in x
-- (tok, a colon, a sum of flags): 1 the scope is in the review index, 2
-- in the due index, 4 in the received index, 8 the blob hash may exist.
-- All of them when not known: a new document (its earlier life may have
-- left index entries behind) or one written by a script that kept no x.
local held = 15
local x = cur[2]
if tok ~= '' and x and string.sub(x, 1, #tok + 1) == tok .. ':' then
  held = tonumber(string.sub(x, #tok + 2)) or 15
end
local function has(flag)
  return math.floor(held / flag) % 2 == 1
end
local left = 0
if ARGV[5] ~= '' then
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[6])
  left = left + 1
elseif has(1) then
  redis.call('ZREM', KEYS[2], ARGV[6])
end
if ARGV[7] ~= '' then
  redis.call('ZADD', KEYS[3], ARGV[7], ARGV[6])
  left = left + 2
elseif has(2) then
  redis.call('ZREM', KEYS[3], ARGV[6])
end
if ARGV[#ARGV] ~= '' then
  redis.call('ZADD', KEYS[5], ARGV[#ARGV], ARGV[6])
  left = left + 4
elseif has(4) then
  redis.call('ZREM', KEYS[5], ARGV[6])
end
local blobs = tok ~= '' and has(8)
if tok == '' then
  redis.call('DEL', KEYS[4])
end
local puts = tonumber(ARGV[8])
local i = 9
for _ = 1, puts do
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
  i = i + 2
  blobs = true
end
if blobs then
  left = left + 8
  while i < #ARGV do
    redis.call('HDEL', KEYS[4], ARGV[i])
    i = i + 1
  end
end
redis.call('HSET', KEYS[1], 't', ARGV[2], 'd', ARGV[3], 'x', ARGV[2] .. ':' .. left)
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  if blobs then
    redis.call('PEXPIRE', KEYS[4], ttl)
  end
else
  redis.call('PERSIST', KEYS[1])
  if blobs then
    redis.call('PERSIST', KEYS[4])
  end
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
