package testserver

import (
	"context"
	"fmt"
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

// MemoryBackend keeps states in process memory, in a limiter.Store. It is
// atomic per key and safe for concurrent use; it never fails.
type MemoryBackend struct {
	store *limiter.Store
}

var _ Backend = (*MemoryBackend)(nil)

// NewMemoryBackend returns a MemoryBackend for cfg, which must be valid.
func NewMemoryBackend(cfg limiter.Config) (*MemoryBackend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("testserver: %w", err)
	}
	return &MemoryBackend{store: limiter.NewStore(cfg, limiter.StoreOptions{})}, nil
}

// Decide implements Backend; it never returns an error.
func (b *MemoryBackend) Decide(_ context.Context, key string, now time.Time) (limiter.Decision, error) {
	return b.store.Decide(key, now), nil
}
