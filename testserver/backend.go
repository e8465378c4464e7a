package testserver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
)

// Backend keeps the limiter states of one route and decides requests.
// Implementations must be safe for concurrent use.
type Backend interface {
	// Decide decides one request of key arriving at now. The time is the
	// caller's: a backend never reads the clock for a decision. An error
	// means no decision could be made (the Handler then answers per
	// HandlerOptions.OnBackendError).
	Decide(ctx context.Context, key string, now time.Time) (limiter.Decision, error)
}

// OrderedBackend is a Backend that knows the order of its own decisions.
// With HandlerOptions.EchoArrival, the Handler reports that order in
// headers.DecisionHeader.
type OrderedBackend interface {
	Backend
	// DecideOrdered is Decide, and also returns the decision's number in
	// the backend's decision order (1, 2, …), taken in the same atomic
	// step that decides: of two decisions of one key, the one numbered
	// lower saw the state first.
	DecideOrdered(ctx context.Context, key string, now time.Time) (limiter.Decision, int64, error)
}

// MemoryBackend keeps states in process memory, in a limiter.Store. It is
// atomic per key and safe for concurrent use; it never fails.
type MemoryBackend struct {
	store *limiter.Store
}

var _ OrderedBackend = (*MemoryBackend)(nil)

// memoryMaxKeys caps a MemoryBackend whose keys never become idle by
// themselves (RefillWhole without ForgetIdle: each key keeps its grid of
// ticks); beyond it the least recently used key starts afresh.
const memoryMaxKeys = 100_000

// NewMemoryBackend returns a MemoryBackend for cfg, which must be valid.
// Keys are dropped once idle (limiter.Config.IdleAt); under RefillWhole
// without ForgetIdle, where keys never are, at most memoryMaxKeys (100,000)
// are kept, the least recently used evicted.
func NewMemoryBackend(cfg limiter.Config) (*MemoryBackend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("testserver: %w", err)
	}
	var opt limiter.StoreOptions
	if cfg.Refill == limiter.RefillWhole && cfg.ForgetIdle == 0 {
		opt.MaxKeys = memoryMaxKeys
	}
	return &MemoryBackend{store: limiter.NewStore(cfg, opt)}, nil
}

// Decide implements Backend; it never returns an error.
func (b *MemoryBackend) Decide(_ context.Context, key string, now time.Time) (limiter.Decision, error) {
	return b.store.Decide(key, now), nil
}

// DecideOrdered implements OrderedBackend; it never returns an error.
func (b *MemoryBackend) DecideOrdered(_ context.Context, key string, now time.Time) (limiter.Decision, int64, error) {
	d, n := b.store.DecideSeq(key, now)
	return d, n, nil
}

// NonAtomicOptions configure a NonAtomicMemoryBackend.
type NonAtomicOptions struct {
	// RaceGap is waited between the read of a key's state and the write of
	// the new one; 0 means no wait (the race then needs requests decided
	// at the same instant, which a synctest bubble gives).
	RaceGap time.Duration
	// AfterRead, when set (tests), runs between the read and the write.
	AfterRead func()
}

// NonAtomicMemoryBackend is the classic check-then-act bug of a shared
// counter, in memory: it reads a key's state, decides with limiter.Step,
// waits RaceGap (a round trip to a remote store), and writes the new state
// back, overwriting whatever other requests wrote meanwhile. Requests
// decided within one gap of each other all see the same stale state and
// over-admit, as RedisBackend with NonAtomic does; unlike Redis, it runs
// inside a testing/synctest bubble (the gap is a timer of the bubble).
//
// Decisions are numbered at the read, the moment each decides. A key's
// state is dropped once it is idle (limiter.Config.IdleAt) and more than
// 4096 keys are held. Safe for concurrent use.
type NonAtomicMemoryBackend struct {
	cfg       limiter.Config
	gap       time.Duration
	afterRead func()

	mu     sync.Mutex
	states map[string]limiter.State
	seq    atomic.Int64
}

var _ OrderedBackend = (*NonAtomicMemoryBackend)(nil)

// nonAtomicSweep is the number of keys beyond which idle states are dropped.
const nonAtomicSweep = 4096

// NewNonAtomicMemoryBackend returns the non-atomic backend for cfg (which
// must be valid).
func NewNonAtomicMemoryBackend(cfg limiter.Config, opt NonAtomicOptions) (*NonAtomicMemoryBackend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("testserver: %w", err)
	}
	if opt.RaceGap < 0 {
		return nil, fmt.Errorf("testserver: race gap %v is negative", opt.RaceGap)
	}
	return &NonAtomicMemoryBackend{cfg: cfg, gap: opt.RaceGap, afterRead: opt.AfterRead,
		states: map[string]limiter.State{}}, nil
}

// Decide implements Backend: read, decide, (race gap), write.
func (b *NonAtomicMemoryBackend) Decide(ctx context.Context, key string, now time.Time) (limiter.Decision, error) {
	d, _, err := b.DecideOrdered(ctx, key, now)
	return d, err
}

// DecideOrdered implements OrderedBackend. It fails only when ctx ends
// during the race gap (nothing is written then).
func (b *NonAtomicMemoryBackend) DecideOrdered(ctx context.Context, key string, now time.Time) (limiter.Decision, int64, error) {
	b.mu.Lock()
	st := b.states[key]
	n := b.seq.Add(1)
	b.mu.Unlock()
	next, dec := b.cfg.Step(st, now)
	if b.afterRead != nil {
		b.afterRead()
	}
	if b.gap > 0 {
		t := time.NewTimer(b.gap)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return limiter.Decision{}, n, fmt.Errorf("testserver: non-atomic backend: %w", ctx.Err())
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.states[key] = next
	if len(b.states) > nonAtomicSweep {
		for k, s := range b.states {
			if idle := b.cfg.IdleAt(s); idle.IsZero() || !idle.After(now) {
				delete(b.states, k)
			}
		}
	}
	return dec, n, nil
}
