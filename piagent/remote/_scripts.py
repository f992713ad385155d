"""The Lua scripts: each runs atomically on the Redis server (see docs/remote.md#atomicity)."""

from __future__ import annotations

__all__ = ["ABORT", "CLAIM", "DECIDE", "PUBLISH", "RECORD_INTENTS", "RELEASE", "RENEW", "TAKE", "WITHDRAW"]

# KEYS: owner, control, then the run's other state keys (RunKeys.state()). ARGV: token, lease ms,
# group, consumer, count, ttl ms. Take the run's lease if free; then make sure the consumer group
# exists (a stream that expired, or never was, is made afresh with it, from id 0: messages sent
# since are read) and mark where this attachment starts: an id of the control stream (an entry
# added and deleted at once, so no consumer ever reads it) after which an abort entry is meant
# for this worker, not an earlier one. The state keys expire ttl ms from now. Returns {mark,
# entries in the consumer's pending list, up to count entries never read (XREADGROUP >, now
# pending too)}, or false while another worker holds the lease.
CLAIM = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return false
end
local ok = redis.pcall('XGROUP', 'CREATE', KEYS[2], ARGV[3], '0', 'MKSTREAM')
if type(ok) == 'table' and ok.err and not string.find(ok.err, 'BUSYGROUP') then
  return redis.error_reply(ok.err)
end
local mark = redis.call('XADD', KEYS[2], '*', 'kind', 'attached')
redis.call('XDEL', KEYS[2], mark)
for i = 2, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[6])
end
local pending = 0
for _, consumer in ipairs(redis.call('XPENDING', KEYS[2], ARGV[3])[4] or {}) do
  if consumer[1] == ARGV[4] then
    pending = tonumber(consumer[2])
  end
end
local new = redis.call('XREADGROUP', 'GROUP', ARGV[3], ARGV[4], 'COUNT', ARGV[5], 'STREAMS', KEYS[2], '>')
return {mark, pending, new and new[1][2] or {}}
"""

# KEYS: owner, then the run's state keys. ARGV: token, lease ms, ttl ms, slack ms. Renew the
# lease if still ours, and with it the expiry of each state key that has less than ttl - slack
# left, or none (a live worker's run never expires under it; each key is written about once per
# slack, not at every renewal): 1, else 0.
RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  local ttl, least = tonumber(ARGV[3]), tonumber(ARGV[3]) - tonumber(ARGV[4])
  for i = 2, #KEYS do
    local left = redis.call('PTTL', KEYS[i])
    if left == -1 or left >= 0 and left < least then
      redis.call('PEXPIRE', KEYS[i], ttl)
    end
  end
  return 1
end
return 0
"""

# KEYS: owner. ARGV: token. Give the lease up if still ours.
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# KEYS: owner, control. ARGV: reason, ttl ms. An abort reaches the control stream (whose expiry
# it renews) only while a worker is attached (holds the lease): an abort sent to an idle run is
# not kept for a later one.
ABORT = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
local id = redis.call('XADD', KEYS[2], '*', 'kind', 'abort', 'reason', ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return id
"""

# KEYS: events, the last event id given. ARGV: max events, ttl ms, the batch's events (JSON as
# json.dumps writes it, one a line: it has no raw newline), how many. Appends the batch as one
# entry whose id is its last event's id (docs/remote.md#the-events-stream): events are numbered on
# ("<ms>-<seq>": seq + 1, seq + 2, ...) from the higher of the newest entry's id and the last id
# given (an entry deleted since leaves the latter above), or from the server's clock for a new
# stream, so every event has an id of its own, above every id the stream has had. Once this numbering
# has passed max events, entries whose ids fall below the newest id minus max events go (MINID ~:
# whole nodes). Renews the stream's expiry. Returns the entry id.
PUBLISH = """
local count = tonumber(ARGV[4])
local function parsed(id)
  local ms, seq = string.match(id or '', '^(%d+)-(%d+)$')
  return ms, tonumber(seq)
end
local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
local base, last = parsed(newest and newest[1])
local top_base, top_last = parsed(redis.call('GET', KEYS[2]))
if top_base and (not base or #top_base > #base or #top_base == #base and top_base > base
    or top_base == base and top_last > last) then
  base, last = top_base, top_last
end
local function append()
  local id, oldest = base .. '-' .. string.format('%d', last + count), last + count - tonumber(ARGV[1]) + 1
  if oldest > 0 then
    return redis.pcall('XADD', KEYS[1], 'MINID', '~', base .. '-' .. string.format('%d', oldest), id, 'events', ARGV[3])
  end
  return redis.pcall('XADD', KEYS[1], id, 'events', ARGV[3])
end
local id = base and append()
if not base or type(id) == 'table' and id.err then
  local now = redis.call('TIME')  -- a new stream, or ids we cannot number on (an entry deleted, a huge seq)
  base, last = now[1] .. string.format('%03d', math.floor(tonumber(now[2]) / 1000)), -1
  id = append()
  if type(id) == 'table' and id.err then
    return redis.error_reply(id.err)
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], id, 'PX', ARGV[2])
return id
"""

# KEYS: approvals, decision list. ARGV: tool call id, decision JSON, ttl ms.
# The first decision on a pending call wins: it removes the call from the pending hash and hands
# the decision to the waiting worker. Returns 1, or 0 if the call was not pending.
DECIDE = """
if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return 1
end
return 0
"""

# KEYS: approvals, decision list, approved list. ARGV: tool call id, ttl ms.
# The worker gives up waiting (timeout or abort): withdraw the request, unless a decision won
# the race, which is then taken as TAKE does and returned (and must be honoured).
WITHDRAW = """
if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 then
  return false
end
local decision = redis.call('LMOVE', KEYS[2], KEYS[3], 'LEFT', 'RIGHT')
if decision then
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
return decision
"""

# KEYS: decision list, approved list. ARGV: ttl ms.
# The worker takes the decision it waited for: kept in the approved list, which expires with it
# (docs/effects.md#remote-runs), until the call's intent uses it. Returns it, or false if gone.
TAKE = """
local decision = redis.call('LMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT')
if decision then
  redis.call('PEXPIRE', KEYS[2], ARGV[1])
end
return decision
"""

# KEYS: intents, then the approved list of each call. ARGV: ttl ms, then each call's id and intent
# JSON, in order. Records the calls' intents (the hash expires ttl ms after its last write) and uses
# up their approvals in one step (docs/effects.md#remote-runs): an approval is either still kept
# (no intent: the call never started) or used (its intent is there).
RECORD_INTENTS = """
for i = 2, #KEYS do
  redis.call('HSET', KEYS[1], ARGV[2 * i - 2], ARGV[2 * i - 1])
  redis.call('DEL', KEYS[i])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return #KEYS - 1
"""
