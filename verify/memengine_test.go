package verify_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/testserver"
)

// memEngine is a small open-loop engine for tests inside a synctest
// bubble: each send waits on a runtime timer (exact under synctest) and
// goes out over the in-memory listener with net/http. The probe engine
// paces with raw nanosleep syscalls, which a synctest bubble cannot
// advance; this engine records the same fields the verifier reads.
type memEngine struct {
	ln     *testserver.MemListener
	url    string
	zero   time.Time
	header string   // identity header, "" for none
	values []string // identity values; k1…kN when nil
	seq    *int64   // shared by every engine of one record

	mu      sync.Mutex
	clients map[int]*http.Client
}

func (e *memEngine) client(i int) *http.Client {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.clients[i]
	if c == nil {
		c = &http.Client{
			Transport: &http.Transport{
				DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
					return e.ln.Dial(ctx, network, addr, netip.Addr{})
				},
				MaxIdleConnsPerHost: 1000,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		e.clients[i] = c
	}
	return c
}

func (e *memEngine) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.clients {
		c.CloseIdleConnections()
	}
}

func (e *memEngine) label(i int) string {
	if e.header == "" {
		return strconv.Itoa(i)
	}
	if i < len(e.values) {
		return e.values[i]
	}
	return "k" + strconv.Itoa(i+1)
}

func (e *memEngine) Run(ctx context.Context, s patterns.Schedule) ([]record.Result, error) {
	begin := s.Start
	if begin.IsZero() {
		begin = time.Now()
	}
	out := make([]record.Result, len(s.Sends))
	e.mu.Lock()
	for i := range out {
		out[i].Seq = *e.seq
		*e.seq++
	}
	e.mu.Unlock()
	var wg sync.WaitGroup
	for i, snd := range s.Sends {
		r := &out[i]
		due := begin.Add(snd.At)
		*r = record.Result{Type: record.TypeResult, Seq: r.Seq, Agent: "a1", Client: e.label(snd.Client),
			Src: "127.0.0.1:1", Method: http.MethodGet, URL: e.url, Phase: snd.Phase,
			Sched: int64(due.Sub(e.zero)), Outcome: record.OutcomeNotSent}
		wg.Go(func() {
			time.Sleep(time.Until(due))
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url, nil)
			if err != nil {
				return
			}
			if e.header != "" {
				req.Header.Set(e.header, e.label(snd.Client))
			}
			r.Sent = int64(time.Since(e.zero))
			r.Wrote = r.Sent
			resp, err := e.client(snd.Client).Do(req)
			if err != nil {
				r.Outcome, r.Err, r.ErrMsg, r.Done = record.OutcomeError, record.ErrOther, err.Error(), int64(time.Since(e.zero))
				return
			}
			r.TTFB = int64(time.Since(e.zero))
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			r.Done = int64(time.Since(e.zero))
			r.Outcome, r.Status = record.OutcomeResponse, resp.StatusCode
			if v := resp.Header.Get(headers.ArrivalHeader); v != "" {
				if ns, err := strconv.ParseInt(v, 10, 64); err == nil {
					a := ns - e.zero.UnixNano()
					r.Arrival = &a
				}
			}
			r.Headers = http.Header{}
			for _, name := range headers.Captured {
				if vs := resp.Header.Values(name); len(vs) > 0 {
					r.Headers[http.CanonicalHeaderKey(name)] = vs
				}
			}
		})
	}
	wg.Wait()
	return out, ctx.Err()
}
