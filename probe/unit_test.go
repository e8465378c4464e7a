package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/net/http2"

	"github.com/rlprobe/rlprobe/record"
)

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		opt  Options
		want []string // every one must appear in the error
	}{
		{"no URL", Options{}, []string{"no target URL"}},
		{"bad scheme", Options{URLs: []string{"ftp://x/"}}, []string{"scheme must be http or https"}},
		{"no host", Options{URLs: []string{"http:///x"}}, []string{"has no host"}},
		{"bad method", Options{URLs: []string{"http://x/"}, Method: "GE T"}, []string{"invalid method"}},
		{"negative durations", Options{URLs: []string{"http://x/"}, Timeout: -1, Grace: -1, RaceHold: -1},
			[]string{"negative timeout", "negative grace", "negative race hold"}},
		{"bad rate", Options{URLs: []string{"http://x/"}, MaxRate: math.NaN()}, []string{"max rate must be positive"}},
		{"unknown race mode", Options{URLs: []string{"http://x/"}, RaceMode: "turbo"}, []string{`unknown race mode "turbo"`}},
		{"single-packet over HTTP/1", Options{URLs: []string{"http://x/"}, RaceMode: RaceSinglePacket}, []string{"needs HTTP/2"}},
		{"bad headers", Options{URLs: []string{"http://x/"}, Header: http.Header{"Bad Name": {"v"}, "X-Ok": {"a\r\nb"}}},
			[]string{`invalid header name "Bad Name"`, "invalid value for header X-Ok"}},
		{"bad identity", Options{URLs: []string{"http://x/"}, ClientHeader: "X Key", ClientValues: []string{"a\nb"}, SourceIPs: []netip.Addr{{}}},
			[]string{"invalid client header name", "invalid client value on line 1", "invalid source address"}},
		{"secret in a bad URL is not echoed", Options{URLs: []string{"gopher://x/?access_token=s3cr3t"}}, []string{"access_token=redacted:sha256:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opt)
			if err == nil {
				t.Fatalf("New(%+v) succeeded, want an error", tt.opt)
			}
			if !errors.Is(err, ErrUsage) {
				t.Errorf("New error %v does not match ErrUsage", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New error = %q, want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("New error %q leaks a secret", err)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	e, err := New(Options{URLs: []string{"https://user:pw@api.test:8443/v1/x?a=1#frag"}})
	if err != nil {
		t.Fatal(err)
	}
	o := e.opt
	if o.Method != "GET" || o.Timeout != DefaultTimeout || o.MaxRate != DefaultMaxRate || o.AbortAfterErrors != DefaultAbortAfterErrors ||
		o.Grace != DefaultGrace || o.RaceMode != RaceBarrier || o.RaceHold != DefaultRaceHold || len(o.Captured) == 0 {
		t.Errorf("defaults = %+v", o)
	}
	tg := e.targets[0]
	if tg.addr != "api.test:8443" || tg.host != "api.test:8443" || tg.requestURI != "/v1/x?a=1" || !tg.tls {
		t.Errorf("target = %+v", tg)
	}
	if tg.tlsAny.ServerName != "api.test" || strings.Join(tg.tlsAny.NextProtos, ",") != "h2,http/1.1" {
		t.Errorf("TLS config: server name %q, ALPN %v", tg.tlsAny.ServerName, tg.tlsAny.NextProtos)
	}
	if strings.Contains(tg.redacted, "pw") || strings.Contains(tg.redacted, "frag") {
		t.Errorf("redacted URL = %q", tg.redacted)
	}
	if e.burst != 1000 {
		t.Errorf("guard bucket = %d, want 1000", e.burst)
	}
}

func TestBuildH1(t *testing.T) {
	e, err := New(Options{
		URLs:         []string{"http://bob:pw@api.test/v1/items?page=2"},
		Method:       http.MethodPost,
		Header:       http.Header{"X-B": {"2"}, "X-A": {"1", "one"}, "Content-Length": {"999"}},
		Body:         []byte(`{"n":1}`),
		ClientHeader: "X-Api-Key",
		ClientValues: []string{"key-0", "key-1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := string(e.pool(1, 0, 0).h1req)
	want := "POST /v1/items?page=2 HTTP/1.1\r\n" +
		"Host: api.test\r\n" +
		"Authorization: Basic Ym9iOnB3\r\n" +
		"User-Agent: rlprobe\r\n" +
		"X-A: 1\r\nX-A: one\r\n" +
		"X-Api-Key: key-1\r\n" +
		"X-B: 2\r\n" +
		"Content-Length: 7\r\n" +
		"\r\n" +
		`{"n":1}`
	if got != want {
		t.Errorf("request =\n%q\nwant\n%q", got, want)
	}
}

func TestClassify(t *testing.T) {
	refused := &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		err  error
		want string
	}{
		{refused, record.ErrRefused},
		{fmt.Errorf("wrapped: %w", refused), record.ErrRefused},
		{os.ErrDeadlineExceeded, record.ErrTimeout},
		{context.DeadlineExceeded, record.ErrTimeout},
		{&net.DNSError{Err: "no such host", Name: "x.test", IsNotFound: true}, record.ErrDNS},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, record.ErrReset},
		{io.EOF, record.ErrReset},
		{io.ErrUnexpectedEOF, record.ErrReset},
		{http2.StreamError{StreamID: 1, Code: http2.ErrCodeRefusedStream}, record.ErrReset},
		{x509.UnknownAuthorityError{}, record.ErrTLS},
		{tls.AlertError(42), record.ErrTLS},
		{withClass(record.ErrTLS, errors.New("handshake failed")), record.ErrTLS},
		{withClass(record.ErrTLS, os.ErrDeadlineExceeded), record.ErrTimeout},
		{errors.New("something else"), record.ErrOther},
	}
	for _, tt := range tests {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("classify(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func i64(v int64) *int64 { return &v }

func TestSummarize(t *testing.T) {
	const us = int64(1000)
	results := []record.Result{
		// steady sends, 0 and 2 ms late
		{Client: "a", Phase: "s", Sched: 0, Sent: 0 + 1, Wrote: 1, Done: 1000 * us, Outcome: record.OutcomeResponse, Status: 200},
		{Client: "a", Phase: "s", Sched: 10_000 * us, Sent: 12_000 * us, Wrote: 12_000 * us, Done: 14_000 * us, Outcome: record.OutcomeResponse, Status: 429},
		// a last-byte race of two: heads early, released 100 µs late, 50 µs apart
		{Client: "b", Phase: "r", Sched: 20_000 * us, Sent: 19_000 * us, Wrote: 20_100 * us, Done: 21_000 * us, Outcome: record.OutcomeResponse, Status: 200, Arrival: i64(20_200 * us)},
		{Client: "c", Phase: "r", Sched: 20_000 * us, Sent: 19_000 * us, Wrote: 20_150 * us, Done: 21_000 * us, Outcome: record.OutcomeResponse, Status: 404, Arrival: i64(20_500 * us)},
		{Client: "c", Phase: "s", Sched: 30_000 * us, Done: 30_001 * us, Outcome: record.OutcomeError, Err: record.ErrRefused},
		{Client: "a", Phase: "s", Sched: 40_000 * us, Outcome: record.OutcomeNotSent, Err: NotSentSignal},
	}
	s := Summarize(results)
	check := func(name string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Summarize: %s = %v, want %v", name, got, want)
		}
	}
	check("scheduled/sent/responses/errors/not-sent", []int{s.Scheduled, s.Sent, s.Responses, s.Errors, s.NotSent}, []int{6, 5, 4, 1, 1})
	check("accepted/rejected/other", []int{s.Accepted, s.Rejected, s.Other}, []int{2, 1, 1})
	check("statuses", s.Statuses, map[string]int{"200": 2, "404": 1, "429": 1})
	check("error classes", s.ErrorClasses, map[string]int{"refused": 1})
	check("not-sent reasons", s.NotSentReasons, map[string]int{"signal": 1})
	check("late", s.Late, 1)
	check("pacing max", s.Pacing.MaxUS, 2000)
	check("pacing count", s.Pacing.Count, 4)
	check("races", s.Races, 1)
	check("race wrote spread", s.RaceWroteSpread.MaxUS, 50)
	check("race arrival spread", s.RaceArrivalSpread.MaxUS, 300)
	check("latency 200", []int64{s.Latency["200"].Count, s.Latency["200"].MaxUS}, []int64{2, 999})
	check("latency 429", s.Latency["429"].P50US, 2000)
	check("clients", s.Clients, []ClientSummary{
		{Client: "a", Sent: 2, Accepted: 1, Rejected: 1, NotSent: 1},
		{Client: "b", Sent: 1, Accepted: 1},
		{Client: "c", Sent: 2, Other: 1, Errors: 1},
	})
	if s.DurationS <= 0.029 || s.DurationS > 0.031 {
		t.Errorf("Summarize: duration = %v s, want 0.030", s.DurationS)
	}
	if empty := Summarize(nil); empty.Scheduled != 0 || empty.Pacing.Count != 0 || empty.SentPerS != 0 {
		t.Errorf("Summarize(nil) = %+v", empty)
	}
}
