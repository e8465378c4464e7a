package testserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlprobe/rlprobe/limiter"
)

// RedisOptions configure a RedisBackend. The zero value is the correct,
// atomic backend under DefaultRedisPrefix.
type RedisOptions struct {
	// Prefix starts every key; "" means DefaultRedisPrefix. Backends with
	// the same Redis, prefix and Config share their quotas (and must agree
	// on the Config).
	Prefix string
	// NonAtomic reproduces the classic check-then-act bug: the backend
	// reads a key's state, decides in Go with limiter.Step, and writes the
	// new state back, in separate round trips, so concurrent requests all
	// decide on the same stale state and over-admit. Redis then holds the
	// same layout as the atomic scripts use, so both modes can share keys.
	NonAtomic bool
	// RaceGap is slept between the read and the write-back of NonAtomic,
	// widening the race so that it reproduces; 0 means no sleep.
	RaceGap time.Duration
}

// RedisBackend keeps limiter states in Redis, shared by every server that
// uses the same Redis and prefix. Each decision is one Lua script
// (go-redis Script.Run: EVALSHA, falling back to EVAL, so a Redis restart
// or SCRIPT FLUSH is survived) that ports limiter.Step: the time is the
// caller's, passed as integer Unix microseconds, and the arithmetic is on
// integers only (exact in Lua's doubles: see limiter's bounds), so the
// decisions are those of MemoryBackend for the same times. GCRA and
// leaky-bucket work in milliseconds, as nginx and limiter do.
//
// Keys: PREFIX{KEY} is a hash (fields a, c, p: the State's At, Count,
// Prev; n: a sequence for log members) and PREFIX{KEY}:log a sorted set
// (sliding-log: one member per logged request, scored by its Unix µs).
// Both expire once the state no longer matters (limiter's IdleAt, plus a
// second).
//
// A RedisBackend is safe for concurrent use.
type RedisBackend struct {
	client    redis.UniversalClient
	cfg       limiter.Config
	p         limiter.Params
	script    *redis.Script
	prefix    string
	nonAtomic bool
	raceGap   time.Duration
	// afterRead, when set (tests), runs between the read and the write of
	// the non-atomic path.
	afterRead func()
	writes    atomic.Uint64
}

var _ Backend = (*RedisBackend)(nil)

// maxExact is 2^53: integers below it are exact in a Lua number.
const maxExact = 1 << 53

// ErrRedisBehaviour explains why the Redis backend refuses a Config with
// a penalty, idle eviction, a refill other than continuous, or a timer.
var ErrRedisBehaviour = errors.New("decided by the memory backend only: the Redis backend's Lua scripts port the algorithms alone")

// behaviours names the behaviours of cfg beyond its algorithm, as the
// serve flags spell them.
func behaviours(cfg limiter.Config) []string {
	var out []string
	if !cfg.Penalty.IsZero() {
		out = append(out, "penalty "+cfg.Penalty.String())
	}
	if cfg.ForgetIdle != 0 {
		out = append(out, "forget-idle")
	}
	if cfg.Refill != limiter.RefillContinuous {
		out = append(out, "refill "+string(cfg.Refill))
	}
	if cfg.Align == limiter.AlignTimer {
		out = append(out, "align timer")
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// NewRedisBackend returns a backend for cfg (which must be valid) on
// client. It does not contact Redis. A Config with a behaviour beyond the
// algorithm (Penalty, ForgetIdle, Refill, AlignTimer) is refused with an
// error wrapping ErrRedisBehaviour.
func NewRedisBackend(client redis.UniversalClient, cfg limiter.Config, opt RedisOptions) (*RedisBackend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("testserver: %w", err)
	}
	if opt.RaceGap < 0 {
		return nil, fmt.Errorf("testserver: race gap %v is negative", opt.RaceGap)
	}
	if b := behaviours(cfg); len(b) > 0 {
		return nil, fmt.Errorf("testserver: redis: %s %s %w", strings.Join(b, ", "), plural(len(b), "is", "are"), ErrRedisBehaviour)
	}
	p := cfg.Params()
	if cfg.Algorithm == limiter.SlidingWindowCounter && float64(p.Limit)*float64(p.WindowUS) >= maxExact/4 {
		return nil, fmt.Errorf("testserver: sliding-window-counter with limit %d over %v is too large for exact arithmetic in Redis's Lua (limit × window in µs must stay below 2^51)", cfg.Limit, cfg.Window)
	}
	b := &RedisBackend{client: client, cfg: cfg, p: p, script: scripts[cfg.Algorithm], prefix: opt.Prefix,
		nonAtomic: opt.NonAtomic, raceGap: opt.RaceGap}
	if b.prefix == "" {
		b.prefix = DefaultRedisPrefix
	}
	if b.script == nil {
		return nil, fmt.Errorf("testserver: no Redis port of algorithm %q", cfg.Algorithm)
	}
	return b, nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// keys returns the hash and sorted-set keys of key.
func (b *RedisBackend) keys(key string) (string, string) {
	k := b.prefix + "{" + key + "}"
	return k, k + ":log"
}

// Decide implements Backend: atomically in one script, or, with NonAtomic,
// by read, decide, (race gap), write.
func (b *RedisBackend) Decide(ctx context.Context, key string, now time.Time) (limiter.Decision, error) {
	if b.nonAtomic {
		return b.decideNonAtomic(ctx, key, now)
	}
	h, l := b.keys(key)
	p := b.p
	res, err := b.script.Run(ctx, b.client, []string{h, l}, now.UnixMicro(), p.Limit, p.WindowUS, b2i(p.Epoch),
		b2i(p.CountRejected), p.IntervalUS, p.RateMilli, p.BurstMilli, p.DelayMilli).Int64Slice()
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("testserver: redis: %w", err)
	}
	if len(res) != 8 {
		return limiter.Decision{}, fmt.Errorf("testserver: redis script returned %d values, want 8", len(res))
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	return limiter.Decision{Allowed: res[0] == 1, Delay: us(res[1]), Limit: res[2], Remaining: res[3],
		UntilMore: us(res[4]), UntilFull: us(res[5]), RetryAfter: us(res[6]), UntilGain: us(res[7])}, nil
}

// decideNonAtomic is the classic bug: read, decide, write back.
func (b *RedisBackend) decideNonAtomic(ctx context.Context, key string, now time.Time) (limiter.Decision, error) {
	h, l := b.keys(key)
	st, err := b.read(ctx, h, l)
	if err != nil {
		return limiter.Decision{}, err
	}
	next, dec := b.cfg.Step(st, now)
	if b.afterRead != nil {
		b.afterRead()
	}
	if b.raceGap > 0 {
		t := time.NewTimer(b.raceGap)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return limiter.Decision{}, fmt.Errorf("testserver: redis: %w", ctx.Err())
		}
	}
	if !sameState(st, next) {
		if err := b.write(ctx, h, l, next, now); err != nil {
			return limiter.Decision{}, err
		}
	}
	return dec, nil
}

func sameState(a, b limiter.State) bool {
	if a.At != b.At || a.Count != b.Count || a.Prev != b.Prev || len(a.Log) != len(b.Log) {
		return false
	}
	for i := range a.Log {
		if a.Log[i] != b.Log[i] {
			return false
		}
	}
	return true
}

// read loads a key's State in one round trip.
func (b *RedisBackend) read(ctx context.Context, h, l string) (limiter.State, error) {
	var fields *redis.SliceCmd
	var log *redis.ZSliceCmd
	_, err := b.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		fields = p.HMGet(ctx, h, "a", "c", "p")
		if b.cfg.Algorithm == limiter.SlidingLog {
			log = p.ZRangeWithScores(ctx, l, 0, -1)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return limiter.State{}, fmt.Errorf("testserver: redis: %w", err)
	}
	var st limiter.State
	dst := []*int64{&st.At, &st.Count, &st.Prev}
	for i, v := range fields.Val() {
		s, ok := v.(string)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return limiter.State{}, fmt.Errorf("testserver: redis: field of %s is %q, not an integer", h, s)
		}
		*dst[i] = n
	}
	if log != nil {
		for _, z := range log.Val() {
			st.Log = append(st.Log, int64(z.Score))
		}
	}
	return st, nil
}

// write stores st in one transaction, with the keys' expiry.
func (b *RedisBackend) write(ctx context.Context, h, l string, st limiter.State, now time.Time) error {
	ttl := time.Second
	if idle := b.cfg.IdleAt(st); !idle.IsZero() {
		ttl += max(idle.Sub(now), 0).Truncate(time.Millisecond) + time.Millisecond
	}
	id := b.writes.Add(1)
	_, err := b.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, h, "a", st.At, "c", st.Count, "p", st.Prev)
		p.PExpire(ctx, h, ttl)
		if b.cfg.Algorithm == limiter.SlidingLog {
			p.Del(ctx, l)
			if len(st.Log) > 0 {
				zs := make([]redis.Z, len(st.Log))
				for i, t := range st.Log {
					zs[i] = redis.Z{Score: float64(t), Member: fmt.Sprintf("%d:g%d.%d.%d", t, time.Now().UnixNano(), id, i)}
				}
				p.ZAdd(ctx, l, zs...)
				p.PExpire(ctx, l, ttl)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("testserver: redis: %w", err)
	}
	return nil
}

// luaPrelude holds the integer helpers every script shares. Lua numbers
// are doubles: integers below 2^53 are exact, and the helpers correct the
// rounding of a division so that quotients are exact too. Numbers are
// handed back to Redis through fmt (tostring would print "1.7e+15").
const luaPrelude = `
local function fdiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
local function cdiv(a, b)
  if a <= 0 then return 0 end
  return fdiv(a - 1, b) + 1
end
local function muldiv(a, b, c)
  if a <= 0 or b <= 0 then return 0 end
  local p = a * b
  if p < 9007199254740992 then return fdiv(p, c) end
  local qa, qb = fdiv(a, c), fdiv(b, c)
  local ra, rb = a - qa * c, b - qb * c
  return qa * qb * c + qa * rb + qb * ra + fdiv(ra * rb, c)
end
local function fmt(x) return string.format('%.0f', x) end
local function pos(x) if x <= 0 then return 0 end return x end
local function expire(key, us)
  redis.call('PEXPIRE', key, fmt(cdiv(pos(us), 1000) + 1000))
end
local hkey, lkey = KEYS[1], KEYS[2]
local now = tonumber(ARGV[1])
local limit, w = tonumber(ARGV[2]), tonumber(ARGV[3])
local epoch, count_rejected = ARGV[4] == '1', ARGV[5] == '1'
local interval, rate_m, burst_m, delay_m = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local st = redis.call('HMGET', hkey, 'a', 'c', 'p')
local at, count, prev = tonumber(st[1] or '0'), tonumber(st[2] or '0'), tonumber(st[3] or '0')
local exists = at ~= 0 or count ~= 0 or prev ~= 0
local function save(a, c, p, idle_at)
  redis.call('HSET', hkey, 'a', fmt(a), 'c', fmt(c), 'p', fmt(p))
  expire(hkey, idle_at - now)
end
`

// luaFixedWindow ports limiter's fixedWindow.
const luaFixedWindow = `
if count == 0 or now >= at + w then
  local start = now
  if epoch then start = fdiv(now, w) * w end
  at, count = start, 0
end
local ok = count < limit
if ok or count_rejected then
  count = count + 1
  save(at, count, 0, at + w)
end
local remaining = limit - count
if remaining < 0 then remaining = 0 end
local until_full = pos(at + w - now)
local until_more = 0
if remaining == 0 then until_more = until_full end
local until_gain = 0
if remaining < limit then until_gain = until_full end
local retry = 0
if not ok then retry = until_more end
return {ok and 1 or 0, 0, limit, remaining, until_more, until_full, retry, until_gain}
`

// luaSlidingLog ports limiter's slidingLog on a sorted set.
const luaSlidingLog = `
local t = now
local last = redis.call('ZRANGE', lkey, -1, -1, 'WITHSCORES')
if #last > 0 and tonumber(last[2]) > t then t = tonumber(last[2]) end
local lo = t - w
local live = redis.call('ZCOUNT', lkey, '(' .. fmt(lo), '+inf')
local ok = live < limit
local newest, oldest
if ok or count_rejected then
  redis.call('ZREMRANGEBYSCORE', lkey, '-inf', fmt(lo))
  local keep = live
  if keep > limit - 1 then keep = limit - 1 end
  if live - keep > 0 then redis.call('ZREMRANGEBYRANK', lkey, 0, live - keep - 1) end
  local seq = redis.call('HINCRBY', hkey, 'n', 1)
  redis.call('ZADD', lkey, fmt(t), fmt(t) .. ':' .. seq)
  live = keep + 1
  newest = t
  expire(hkey, t + w - now)
  expire(lkey, t + w - now)
  oldest = tonumber(redis.call('ZRANGE', lkey, 0, 0, 'WITHSCORES')[2])
elseif live > 0 then
  newest = tonumber(last[2])
  oldest = tonumber(redis.call('ZRANGEBYSCORE', lkey, '(' .. fmt(lo), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2])
end
local remaining = limit - live
local until_full, until_more, until_gain = 0, 0, 0
if live > 0 then until_full, until_gain = pos(newest + w - now), pos(oldest + w - now) end
if remaining == 0 then until_more = until_gain end
local retry = 0
if not ok then retry = until_more end
return {ok and 1 or 0, 0, limit, remaining, until_more, until_full, retry, until_gain}
`

// luaSlidingWindowCounter ports limiter's slidingWindowCounter.
const luaSlidingWindowCounter = `
local curr = count
local idle = curr == 0 and prev == 0
if epoch then
  local start = fdiv(now, w) * w
  if idle or start >= at + w + w then at, curr, prev = start, 0, 0
  elseif start >= at + w then at, curr, prev = at + w, 0, curr end
else
  if idle or now >= at + w + w then at, curr, prev = now, 0, 0
  elseif now >= at + w then at, curr, prev = at + w, 0, curr end
end
local e = now - at
if e < 0 then e = 0 end
if e > w then e = w end
local ok = muldiv(prev, w - e, w) + curr < limit
if ok or count_rejected then
  curr = curr + 1
  save(at, curr, prev, at + w + w)
end
local est = muldiv(prev, w - e, w) + curr
local remaining = limit - est
if remaining < 0 then remaining = 0 end
local function until_below(k)
  if muldiv(prev, w - e, w) + curr < k then return 0 end
  if curr < k then
    local x = muldiv(prev - k + curr, w, prev) + 1
    if x > w then x = w end
    return at + x - now
  end
  local x = muldiv(curr - k, w, curr) + 1
  return at + w + x - now
end
local until_more, until_full = pos(until_below(limit)), pos(until_below(1))
local until_gain = 0
if est > 0 then
  local k = est
  if k > limit then k = limit end
  until_gain = pos(until_below(k))
end
local retry = 0
if not ok then retry = until_more end
return {ok and 1 or 0, 0, limit, remaining, until_more, until_full, retry, until_gain}
`

// luaTokenBucket ports limiter's tokenBucket (At = full-again instant).
const luaTokenBucket = `
local tat = at
if not exists or now > tat then tat = now end
local slack = (limit - 1) * interval
local ok = tat - now <= slack
if ok then
  tat = tat + interval
  save(tat, 0, 0, tat)
end
local ahead = tat - now
local remaining = limit - cdiv(ahead, interval)
if remaining < 0 then remaining = 0 end
local until_more = 0
if remaining == 0 then until_more = pos(ahead - slack) end
local used = cdiv(ahead, interval)
if used > limit then used = limit end
local until_gain = 0
if used > 0 then until_gain = pos(ahead - (used - 1) * interval) end
local retry = 0
if not ok then retry = until_more end
return {ok and 1 or 0, 0, limit, remaining, until_more, pos(ahead), retry, until_gain}
`

// luaNginx ports limiter's nginx (GCRA, leaky bucket): At = last (ms),
// Count = excess (milli-requests).
const luaNginx = `
local ms = fdiv(now, 1000)
local function excess_at(last, exc)
  local el = ms - last
  if el < -60000 then el = 1 elseif el < 0 then el = 0 end
  local e = exc - muldiv(rate_m, el, 1000) + 1000
  if e < 0 then e = 0 end
  return e, el
end
local function full_at(last, exc)
  return (last + cdiv((exc + 1000) * 1000, rate_m)) * 1000
end
local ok, excess = false, 0
if not exists then
  at, count, ok = ms, 0, true
  save(at, count, 0, full_at(at, count))
else
  local el
  excess, el = excess_at(at, count)
  if excess <= burst_m then
    ok = true
    count = excess
    if el ~= 0 then at = ms end
    save(at, count, 0, full_at(at, count))
  end
end
local delay = 0
if ok and delay_m >= 0 and excess > delay_m then
  delay = fdiv((excess - delay_m) * 1000, rate_m) * 1000
end
local nxt = excess_at(at, count)  -- first result only
local remaining, until_more, until_full, until_gain = 0, 0, 0, 0
if nxt <= burst_m then
  remaining = fdiv(burst_m - nxt, 1000) + 1
  local target = burst_m - 1000 * remaining
  if target >= 0 then
    until_gain = pos((at + cdiv((count + 1000 - target) * 1000, rate_m)) * 1000 - now)
  end
else
  local need = count + 1000 - burst_m
  until_more = pos((at + cdiv(need * 1000, rate_m)) * 1000 - now)
  until_gain = until_more
end
if nxt > 0 then until_full = pos(full_at(at, count) - now) end
local retry = 0
if not ok then retry = until_more end
return {ok and 1 or 0, delay, limit, remaining, until_more, until_full, retry, until_gain}
`

// scripts are the atomic ports, one per algorithm.
var scripts = func() map[limiter.Algorithm]*redis.Script {
	nginx := redis.NewScript(luaPrelude + luaNginx)
	return map[limiter.Algorithm]*redis.Script{
		limiter.FixedWindow:          redis.NewScript(luaPrelude + luaFixedWindow),
		limiter.SlidingLog:           redis.NewScript(luaPrelude + luaSlidingLog),
		limiter.SlidingWindowCounter: redis.NewScript(luaPrelude + luaSlidingWindowCounter),
		limiter.TokenBucket:          redis.NewScript(luaPrelude + luaTokenBucket),
		limiter.GCRA:                 nginx,
		limiter.LeakyBucket:          nginx,
	}
}()

// defaultRedisPort is redis-server's port, as redis-cli assumes it.
const defaultRedisPort = "6379"

// ParseRedisAddress reads where Redis is, in any form a user would type:
// a URL (redis://[user:password@]host[:port][/db], rediss:// for TLS,
// unix:///path), or, as redis-cli takes -h and -p, a bare host:port
// ("127.0.0.1:6379", "[::1]:6380", "localhost"), a host alone (port 6379),
// ":port" (host 127.0.0.1) or the path of a Unix socket ("/run/redis.sock").
// Errors name the forms accepted.
func ParseRedisAddress(s string) (*redis.Options, error) {
	bad := func(why string) error {
		return fmt.Errorf("testserver: redis address %q: %s; want host:port such as 127.0.0.1:6379, a socket path, or a URL such as redis://127.0.0.1:6379/0", s, why)
	}
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return nil, bad("empty")
	case strings.Contains(s, "://"):
		opt, err := redis.ParseURL(s)
		if err != nil {
			return nil, fmt.Errorf("testserver: redis URL %q: %w (want redis://[user:password@]host[:port][/db], rediss:// or unix://, or host:port)", s, err)
		}
		return opt, nil
	case strings.HasPrefix(s, "/"):
		return &redis.Options{Network: "unix", Addr: s}, nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// No port: a host name or a bare IP address (IPv6 included).
		if strings.ContainsAny(s, "/@?#[]") || (strings.Contains(s, ":") && !isIP(s)) {
			return nil, bad(err.Error())
		}
		host, port = s, defaultRedisPort
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, bad(fmt.Sprintf("port %q is not a number from 1 to 65535", port))
	}
	if strings.ContainsAny(host, "/@?# ") {
		return nil, bad(fmt.Sprintf("host %q", host))
	}
	return &redis.Options{Network: "tcp", Addr: net.JoinHostPort(host, port)}, nil
}

// isIP reports whether s is an IP address.
func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}
