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
//	{2, name, data, ...}  not written: the blobs the write took as absent
//	               (Write.Absent) that exist, each name with its data
//
// Absent values are encoded by the reply's length, never by Lua false, which
// reaches RESP3 clients as a boolean rather than a nil.
//
// The due and received indexes work like the review index. The scope's
// blobs live in a hash of their own (same hash tag) that expires with the
// document: every write that may leave a blob gives it the document's TTL.
//
// The hash's field x records, under the write's token, which indexes the
// write left the scope in and at which time, and whether the blob hash may
// exist, so that the next write removes the scope only from an index that
// holds it, adds it only where it is not already at that very time, and
// leaves alone a blob hash that does not exist (issue #29: those were most
// of a step's commands). Nothing else adds to the indexes or the blob
// hash, and nothing but pruneScript removes from them, so x is exact while
// its token is the document's. A document last written by a script that
// kept no x, or no times in it (an older gateway's), clears everything and
// adds everything, as that script did.
//
// A document created afresh touches no index it does not set, and no blob
// hash. An earlier life of the scope (a document that expired) may have
// left entries in the indexes: the listings skip an entry whose scope's x
// says the index does not hold it, and prune it (pruneScript), as they do
// an entry whose document has gone. The earlier life's blob hash expired
// with its document: every write that may leave a blob gives both the same
// expiry in the same script, and nothing deletes a document.
//
// KEYS[1] scope hash, KEYS[2] review index of the scope's bucket, KEYS[3]
// due index of the bucket, KEYS[4] the scope's blob hash, KEYS[5] received
// index of the bucket.
// ARGV[1] expected token ("" = no document), ARGV[2] new token, ARGV[3] doc,
// ARGV[4] TTL in ms ("0" = no expiry), ARGV[5] review time in unix ms
// ("" = none), ARGV[6] scope (the index member), ARGV[7] due time in unix
// ms ("" = none), ARGV[8] n, the number of blobs to put, ARGV[9] m, the
// number of blobs taken as absent; then n name, data pairs; then the m
// names taken as absent; then the names of blobs to delete; last, the
// received time in unix ms ("" = none), kept like the due time in KEYS[5].
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
-- (tok, a colon, a sum of flags, then a colon and the time of each index
-- that holds the scope, "" for one that does not): 1 the scope is in the
-- review index, 2 in the due index, 4 in the received index, 8 the blob
-- hash may exist. Nothing for a new document; all of them, at unknown
-- times, when x is not known (a script that kept no x or no times).
local held, was = 0, {}
if tok ~= '' then
  held = 15
  local x = cur[2]
  if x and string.sub(x, 1, #tok + 1) == tok .. ':' then
    local f, r, d, v = string.match(string.sub(x, #tok + 2), '^(%d+):(-?%d*):(-?%d*):(-?%d*)$')
    if f then
      held, was[1], was[2], was[4] = tonumber(f), r, d, v
    end
  end
end
local function has(flag)
  return math.floor(held / flag) % 2 == 1
end
local puts, absents = tonumber(ARGV[8]), tonumber(ARGV[9])
if absents > 0 and has(8) then
  local first = 10 + 2 * puts
  local names = {}
  for j = 1, absents do
    names[j] = ARGV[first + j - 1]
  end
  local found = redis.call('HMGET', KEYS[4], unpack(names))
  local out = {2}
  for j = 1, absents do
    if found[j] then
      out[#out + 1] = names[j]
      out[#out + 1] = found[j]
    end
  end
  if #out > 1 then
    return out
  end
end
local left = 0
local function index(flag, key, at)
  if at ~= '' then
    if not (has(flag) and was[flag] == at) then
      redis.call('ZADD', key, at, ARGV[6])
    end
    left = left + flag
  elseif has(flag) then
    redis.call('ZREM', key, ARGV[6])
  end
end
index(1, KEYS[2], ARGV[5])
index(2, KEYS[3], ARGV[7])
index(4, KEYS[5], ARGV[#ARGV])
local blobs = has(8)
local i = 10
for _ = 1, puts do
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
  i = i + 2
  blobs = true
end
i = i + absents
if blobs then
  left = left + 8
  while i < #ARGV do
    redis.call('HDEL', KEYS[4], ARGV[i])
    i = i + 1
  end
end
redis.call('HSET', KEYS[1], 't', ARGV[2], 'd', ARGV[3],
  'x', ARGV[2] .. ':' .. left .. ':' .. ARGV[5] .. ':' .. ARGV[7] .. ':' .. ARGV[#ARGV])
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

// pruneScript drops an index entry (review, due or received) that names a
// scope the index does not hold: its document has gone (expired or
// deleted by hand), or the scope's x, written by the write script, says
// the document now in its place left nothing in this index (the entry is
// an earlier life's). Checking and removing in one step means a writer
// that sets the entry at the same moment cannot lose it. x not known (an
// older gateway's write): the entry stays, as the older script kept the
// indexes exact.
//
// KEYS[1] index, KEYS[2] scope hash (same slot). ARGV[1] scope, ARGV[2]
// the index's flag in x.
var pruneScript = goredis.NewScript(`
local cur = redis.call('HMGET', KEYS[2], 't', 'x')
local tok, x = cur[1], cur[2]
if tok then
  if not x or string.sub(x, 1, #tok + 1) ~= tok .. ':' then
    return 0
  end
  local f = tonumber(string.match(string.sub(x, #tok + 2), '^%d+'))
  if not f or math.floor(f / tonumber(ARGV[2])) % 2 == 1 then
    return 0
  end
end
return redis.call('ZREM', KEYS[1], ARGV[1])
`)
