package testserver

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
)

// Store says whether a deployment's limiter instances share their state.
type Store string

// The stores (serve --store).
const (
	// StoreLocal gives every instance a state of its own: a limit of N per
	// instance, k·N behind the balancer.
	StoreLocal Store = "local"
	// StoreShared gives every instance the one state: N in all.
	StoreShared Store = "shared"
)

// Balance says how a deployment's balancer spreads requests over its
// instances.
type Balance string

// The balancing modes (serve --balance).
const (
	// BalanceConnection sends each new connection to the next instance,
	// round-robin, and keeps it there.
	BalanceConnection Balance = "connection"
	// BalanceRequest sends each request to the next instance.
	BalanceRequest Balance = "request"
)

// KeyFault is a defect of a route's key derivation.
type KeyFault string

// KeyCollapse keys every request as KeyGlobal whatever Policy.Key says —
// the limiter that sees the proxy's address rather than the client's. The
// configured key still shows in the log.
const KeyCollapse KeyFault = "collapse"

// Deployment is how the reference server runs its limiter: Instances
// limiter instances behind one listener (0 or 1: one), their state local
// to each or shared (Store, "" = StoreLocal), requests spread by
// connection or by request (Balance, "" = BalanceConnection). Nothing the
// server sends names an instance: whoever probes it must tell them apart
// by behaviour alone. Decision numbers (HandlerOptions.EchoArrival) are
// the deciding state's: per instance with a local store.
type Deployment struct {
	Instances int
	Store     Store
	Balance   Balance
}

// Validate reports what is wrong with d.
func (d Deployment) Validate() error {
	switch {
	case d.Instances < 0:
		return fmt.Errorf("testserver: instances %d: want at least 1", d.Instances)
	case d.Instances > maxInstances:
		return fmt.Errorf("testserver: instances %d: at most %d", d.Instances, maxInstances)
	}
	switch d.Store {
	case "", StoreLocal, StoreShared:
	default:
		return fmt.Errorf("testserver: store %q (valid: %s, %s)", d.Store, StoreLocal, StoreShared)
	}
	switch d.Balance {
	case "", BalanceConnection, BalanceRequest:
	default:
		return fmt.Errorf("testserver: balance %q (valid: %s, %s)", d.Balance, BalanceConnection, BalanceRequest)
	}
	return nil
}

// maxInstances bounds a deployment: each instance holds a state per key
// and route.
const maxInstances = 64

// perInstance returns how many limiter states a route keeps: Instances
// with a local store, else one.
func (d Deployment) perInstance() int {
	if d.Instances > 1 && d.Store != StoreShared {
		return d.Instances
	}
	return 1
}

// balancer assigns requests to instances (see Deployment).
type balancer struct {
	n       int
	byConn  bool
	next    atomic.Uint64 // the next request's or connection's instance
	mu      sync.Mutex
	conns   map[string]int // by remote address, when no connection context says
	connGen int
}

func newBalancer(d Deployment) *balancer {
	return &balancer{n: max(d.Instances, 1), byConn: d.Balance != BalanceRequest, conns: map[string]int{}}
}

// connInstanceKey is the context key of a connection's instance, set when
// the Server accepts it (Server's ConnContext).
type connInstanceKey struct{}

// connCounter numbers a server's accepted connections.
type connCounter struct{ next atomic.Uint64 }

// withConn returns ctx carrying the instance of a newly accepted
// connection.
func (c *connCounter) withConn(ctx context.Context) context.Context {
	return context.WithValue(ctx, connInstanceKey{}, c.next.Add(1)-1)
}

// maxBalancedConns bounds the remote addresses a balancer remembers when
// no connection context numbers connections: it starts afresh beyond.
const maxBalancedConns = 1 << 16

// instance returns the instance that decides r.
func (b *balancer) instance(r *http.Request) int {
	if b.n <= 1 {
		return 0
	}
	if !b.byConn {
		return int((b.next.Add(1) - 1) % uint64(b.n))
	}
	if c, ok := r.Context().Value(connInstanceKey{}).(uint64); ok {
		return int(c % uint64(b.n))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	i, ok := b.conns[r.RemoteAddr]
	if !ok {
		if len(b.conns) >= maxBalancedConns {
			clear(b.conns)
		}
		i = b.connGen % b.n
		b.connGen++
		b.conns[r.RemoteAddr] = i
	}
	return i
}

// instanceKey is the context key of the instance deciding a request.
type instanceKey struct{}

func withInstance(ctx context.Context, i int) context.Context {
	return context.WithValue(ctx, instanceKey{}, i)
}

func instanceOf(ctx context.Context) int {
	i, _ := ctx.Value(instanceKey{}).(int)
	return i
}

// instances is a route's limiter instances with local state: each request
// is decided by the one its balancer chose (instanceOf).
type instances []Backend

// Decide decides with the request's instance.
func (is instances) Decide(ctx context.Context, key string, now time.Time) (limiter.Decision, error) {
	return is[instanceOf(ctx)%len(is)].Decide(ctx, key, now)
}

// DecideOrdered is Decide with the instance's own decision number; an
// instance that does not number its decisions gives 0.
func (is instances) DecideOrdered(ctx context.Context, key string, now time.Time) (limiter.Decision, int64, error) {
	b := is[instanceOf(ctx)%len(is)]
	if ob, ok := b.(OrderedBackend); ok {
		return ob.DecideOrdered(ctx, key, now)
	}
	d, err := b.Decide(ctx, key, now)
	return d, 0, err
}

var _ OrderedBackend = instances(nil)
