package limiter

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// StoreOptions tunes a [Store]. The zero value is a store without a key cap.
type StoreOptions struct {
	// MaxKeys caps the number of keys held; 0 means no cap. When a new key
	// would exceed the cap, the least recently used key of its shard is
	// evicted (and starts afresh, as never seen, if it comes back). Keys are
	// spread over shards by hash, each shard holding its share of MaxKeys
	// (shares differ by at most one), so the store holds at most MaxKeys
	// keys and evicts approximately the least recently used key overall:
	// eviction can start a little before MaxKeys keys are held when one
	// shard fills first. Caps below 2048 use a single shard, exact LRU.
	MaxKeys int
}

// Store decides requests for many keys with one Config, keeping each key's
// State in memory. It is safe for concurrent use; Decide calls for different
// keys rarely contend (keys are spread over up to 64 shards by FNV-1a hash,
// each with its own mutex).
//
// Idle keys expire without a background goroutine: a key whose State has
// become equivalent to the zero State (see [Config.IdleAt]: for window
// algorithms at most two windows after its last request, for buckets when
// the bucket is full again) is dropped by later Decide calls, which sweep
// the least recently used end of their shard (and, opportunistically, of
// one other shard). Forgetting such a key changes no decision. Under
// ForgetIdle a key is idle at most ForgetIdle after its last request (and
// Step treats it as the zero State from then on, dropped or not); during a
// block it is idle at the block's end; under RefillWhole without ForgetIdle
// it is never idle (its grid of ticks is its own), so such keys stay until
// MaxKeys evicts them. A sweep stops at the first key still in use, so a
// long block delays the drop of keys used before it (never a decision).
// Expiry follows the times passed to Decide, which should be roughly
// non-decreasing (a wall clock).
//
// Create a Store with NewStore; the zero Store is not usable.
type Store struct {
	cfg    Config
	m      model
	shards []shard
	mask   uint64
	// seq numbers the decisions; it is incremented under the deciding
	// shard's lock (see DecideSeq).
	seq atomic.Int64
}

const (
	maxShards     = 64
	minShardKeys  = 1024 // a capped shard holds at least this many keys
	sweepOwn      = 64   // idle keys a Decide may drop from its own shard
	sweepNeighbor = 8    // … and from another shard
)

type shard struct {
	mu   sync.Mutex
	keys map[string]*entry
	lru  entry // sentinel: lru.next is the most recently used entry
	max  int   // key cap; 0 = none
	now  int64 // latest µs seen by this shard
	_    [64]byte
}

type entry struct {
	key        string
	st         State
	idle       int64 // µs from which st is equivalent to the zero State
	prev, next *entry
}

// NewStore returns an empty Store deciding with cfg. It panics if cfg is
// invalid (check cfg.Validate first): a Store over a meaningless Config
// would silently limit wrongly.
func NewStore(cfg Config, opt StoreOptions) *Store {
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("limiter.NewStore: invalid config: %v", err))
	}
	n := maxShards
	if opt.MaxKeys > 0 {
		n = 1
		for n < maxShards && opt.MaxKeys/(2*n) >= minShardKeys {
			n *= 2
		}
	}
	s := &Store{cfg: cfg, m: cfg.compile(), shards: make([]shard, n), mask: uint64(n - 1)}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.keys = make(map[string]*entry)
		sh.lru.next, sh.lru.prev = &sh.lru, &sh.lru
		sh.now = math.MinInt64
		if opt.MaxKeys > 0 {
			sh.max = opt.MaxKeys / n
			if i < opt.MaxKeys%n {
				sh.max++
			}
		}
	}
	return s
}

// Config returns the Config the store decides with.
func (s *Store) Config() Config { return s.cfg }

// Decide decides one request for key arriving at now, updating the key's
// State, as Config.Step would with the key's stored State. A key seen for
// the first time, expired or evicted starts from the zero State.
func (s *Store) Decide(key string, now time.Time) Decision {
	d, _ := s.DecideSeq(key, now)
	return d
}

// DecideSeq is Decide, and also returns the decision's number in the
// store's decision order: 1 for its first decision, 2 for the next, and so
// on. The number is taken under the same lock that steps the key's State,
// so two decisions of one key are numbered in the order the State saw
// them, whatever the order of their times or of their callers' returns;
// numbers of different keys interleave as the decisions did.
func (s *Store) DecideSeq(key string, now time.Time) (Decision, int64) {
	us := now.UnixMicro()
	h := fnv1a(key)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	sh.now = max(sh.now, us)
	e := sh.keys[key]
	if e == nil {
		sh.sweep(us, sweepOwn)
		if sh.max > 0 && len(sh.keys) >= sh.max {
			sh.remove(sh.lru.prev) // evict the least recently used
		}
		key = strings.Clone(key) // don't pin the caller's buffer
		e = &entry{key: key}
		sh.keys[key] = e
		sh.pushFront(e)
	} else if e != sh.lru.next {
		sh.unlink(e)
		sh.pushFront(e)
	}
	var d Decision
	e.st, d = s.m.step(e.st, us, true)
	n := s.seq.Add(1)
	e.idle = s.m.idleAt(e.st)
	sh.sweep(us, sweepOwn)
	sh.mu.Unlock()

	if len(s.shards) > 1 {
		other := &s.shards[(h>>32)&s.mask]
		if other != sh && other.mu.TryLock() {
			other.sweep(min(us, other.now), sweepNeighbor)
			other.mu.Unlock()
		}
	}
	return d, n
}

// Len returns the number of keys held after dropping every key idle as of
// the latest time passed to Decide.
func (s *Store) Len() int {
	now := int64(math.MinInt64)
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		now = max(now, sh.now)
		sh.mu.Unlock()
	}
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.sweep(now, math.MaxInt)
		n += len(sh.keys)
		sh.mu.Unlock()
	}
	return n
}

// sweep drops up to budget idle entries from the least recently used end,
// stopping at the first one still in use. Without blocks, RefillWhole or
// ForgetIdle every key is idle at most one bucket span or two windows after
// its last use, so what remains was all used within that time.
func (sh *shard) sweep(now int64, budget int) {
	for ; budget > 0; budget-- {
		e := sh.lru.prev
		if e == &sh.lru || e.idle > now {
			return
		}
		sh.remove(e)
	}
}

func (sh *shard) remove(e *entry) {
	sh.unlink(e)
	delete(sh.keys, e.key)
}

func (sh *shard) unlink(e *entry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (sh *shard) pushFront(e *entry) {
	e.prev, e.next = &sh.lru, sh.lru.next
	sh.lru.next.prev = e
	sh.lru.next = e
}

// fnv1a is the 64-bit FNV-1a hash of s.
func fnv1a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
