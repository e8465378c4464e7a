package watch

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

// Metrics are a watch's Prometheus metrics, on a registry of their own.
// Names follow Prometheus's conventions: the rlprobe_ prefix, base units
// (seconds, requests) in the name, _total on counters. Safe for concurrent
// use.
type Metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	rulePass  *prometheus.GaugeVec
	findings  *prometheus.GaugeVec
	findTotal *prometheus.CounterVec
	drifts    *prometheus.CounterVec
	cycles    *prometheus.CounterVec
	spent     *prometheus.CounterVec
	lastCycle prometheus.Gauge
	limit     *prometheus.GaugeVec
	window    *prometheus.GaugeVec
	rate      *prometheus.GaugeVec
	capacity  *prometheus.GaugeVec
	family    *prometheus.GaugeVec
}

// NewMetrics registers the metrics on a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rlprobe_requests_total",
		Help: "Probe requests sent by watch, by class (accepted, rejected, other, error, not-sent) and HTTP status (\"\" without an answer)."},
		[]string{"outcome", "status"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rlprobe_probe_latency_seconds",
		Help:    "Latency of watch's probe requests (last byte written to response read), by class.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"outcome"})
	m.rulePass = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rlprobe_rule_pass",
		Help: "Last verdict per declared rule: 1 when the last cycle found no certain error, 0 when it did."}, []string{"rule"})
	m.findings = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rlprobe_findings",
		Help: "Findings of the last cycle, by id, severity and certainty."}, []string{"id", "severity", "certainty"})
	m.findTotal = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rlprobe_findings_total",
		Help: "Findings over all cycles, by id and severity."}, []string{"id", "severity"})
	m.drifts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rlprobe_drift_events_total",
		Help: "Policy drift events, by what changed (limit, window, family, rate, capacity, headers, retry-after)."}, []string{"field"})
	m.cycles = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rlprobe_cycles_total",
		Help: "Watch cycles run, by result (ok, error)."}, []string{"result"})
	m.spent = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rlprobe_budget_requests_total",
		Help: "Requests spent, by quota: shared (the budgeted share of everyone's quota) or own (watch's own identity, exhausting cycles)."}, []string{"quota"})
	m.lastCycle = prometheus.NewGauge(prometheus.GaugeOpts{Name: "rlprobe_last_cycle_timestamp_seconds",
		Help: "Unix time at which the last cycle ended."})
	m.limit = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rlprobe_limit_requests",
		Help: "The limit per window as last known, by source (infer, headers, exhaust)."}, []string{"source"})
	m.window = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rlprobe_window_seconds",
		Help: "The window length as last known, by source (infer, headers)."}, []string{"source"})
	m.rate = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rlprobe_rate_requests_per_second",
		Help: "A bucket's refill rate as last inferred."}, []string{"source"})
	m.capacity = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rlprobe_capacity_requests",
		Help: "A bucket's capacity as last known, by source (infer, exhaust)."}, []string{"source"})
	m.family = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rlprobe_algorithm_info",
		Help: "The inferred algorithm family: 1 for the family last inferred."}, []string{"algorithm"})
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.rulePass, m.findings, m.findTotal, m.drifts, m.cycles, m.spent, m.lastCycle, m.limit, m.window, m.rate, m.capacity, m.family} {
		f(c)
	}
	return m
}

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the metrics' registry (for tests and embedding).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Results counts a cycle's results; own tells whether they spent watch's
// own identity's quota rather than the shared one.
func (m *Metrics) Results(rs []record.Result, declared int, isOwn func(record.Result) bool) {
	for _, r := range rs {
		c, _ := record.Classify(r, declared)
		status := ""
		if r.Outcome == record.OutcomeResponse {
			status = strconv.Itoa(r.Status)
		}
		m.requests.WithLabelValues(string(c), status).Inc()
		if r.Outcome == record.OutcomeNotSent {
			continue
		}
		quota := "shared"
		if isOwn != nil && isOwn(r) {
			quota = "own"
		}
		m.spent.WithLabelValues(quota).Inc()
		if lat, ok := r.Latency(); ok && r.Outcome == record.OutcomeResponse {
			m.latency.WithLabelValues(string(c)).Observe(time.Duration(lat).Seconds())
		}
	}
}

// Verdict sets the last verdict per rule and the findings of the cycle.
func (m *Metrics) Verdict(rep verify.Report) {
	m.findings.Reset()
	failed := map[string]bool{}
	for _, e := range rep.Policy.Endpoints {
		failed[e.String()] = false
	}
	for _, f := range rep.Findings {
		m.findings.WithLabelValues(f.ID, string(f.Severity), string(f.Certainty)).Inc()
		m.findTotal.WithLabelValues(f.ID, string(f.Severity)).Inc()
	}
	fails := rep.Failed()
	for rule := range failed {
		v := 1.0
		if fails {
			v = 0
		}
		m.rulePass.WithLabelValues(rule).Set(v)
	}
}

// Inference sets the parameter gauges from an inference.
func (m *Metrics) Inference(inf *infer.Inference) {
	if inf == nil {
		return
	}
	m.family.Reset()
	m.family.WithLabelValues(string(inf.Algorithm)).Set(1)
	p := inf.Params
	set := func(g *prometheus.GaugeVec, q *infer.Param) {
		if q != nil {
			g.WithLabelValues("infer").Set(q.Value)
		}
	}
	set(m.limit, p.Limit)
	set(m.window, p.WindowS)
	set(m.rate, p.RatePerS)
	set(m.capacity, p.Capacity)
}

// Observation sets the gauges a cycle's observation knows.
func (m *Metrics) Observation(o Observation, capacity bool) {
	if a := o.Advertised; a != nil {
		m.limit.WithLabelValues("headers").Set(float64(a.Limit))
		m.window.WithLabelValues("headers").Set(a.Window.Seconds())
	}
	if o.Exhausted != nil {
		g := m.limit
		if capacity {
			g = m.capacity
		}
		g.WithLabelValues("exhaust").Set(float64(*o.Exhausted))
	}
}

// Drift counts drift events.
func (m *Metrics) Drift(ds []Drift) {
	for _, d := range ds {
		m.drifts.WithLabelValues(d.Field).Inc()
	}
}

// Cycle counts a cycle that ended at end, ok or not.
func (m *Metrics) Cycle(ok bool, end time.Time) {
	result := "ok"
	if !ok {
		result = "error"
	}
	m.cycles.WithLabelValues(result).Inc()
	m.lastCycle.Set(float64(end.UnixNano()) / 1e9)
}
