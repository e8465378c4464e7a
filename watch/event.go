package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

// EventSchema is the "schema" of a watch event document.
const EventSchema = "rlprobe.watch-event/v1"

// Event kinds (docs/schema/watch-event.json lists them).
const (
	// KindStart: the watch started, after the first request chose the
	// mode; Message has the plan and budget, Mode and Budget say them.
	KindStart = "start"
	// KindCycle: a cycle ended; Verdict is its verdict against the policy
	// (pass, fail, incomplete; "" without a policy).
	KindCycle = "cycle"
	// KindFinding: a cycle's finding against the declared policy.
	KindFinding = "finding"
	// KindDrift: the limiter changed beyond its bounds (finding
	// policy-drift).
	KindDrift = "drift"
	// KindCycleError: a cycle could not run or judge (target down…).
	KindCycleError = "cycle-error"
	// KindStop: the watch stopped (signal, --once).
	KindStop = "stop"
)

// Kinds lists the event kinds in the schema's order.
var Kinds = []string{KindStart, KindCycle, KindFinding, KindDrift, KindCycleError, KindStop}

// IDPolicyDrift is the finding id of a drift (contract.md's findings).
const IDPolicyDrift = verify.IDPolicyDrift

// Event is one watch event: a log line, a webhook POST, a metrics update.
type Event struct {
	Schema  string    `json:"schema"`
	Tool    string    `json:"tool"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Cycle   int       `json:"cycle"`
	Targets []string  `json:"targets"`
	// Message says what happened in one line.
	Message string `json:"message"`
	// Verdict of a cycle event (pass, fail, incomplete), "" when no policy
	// is declared.
	Verdict string `json:"verdict,omitempty"`
	// Finding of a finding event; Drift and Finding (id policy-drift) of a
	// drift event.
	Finding *verify.Finding `json:"finding,omitempty"`
	Drift   *Drift          `json:"drift,omitempty"`
	// RecordFile is the cycle's record file.
	RecordFile string `json:"record_file,omitempty"`
	// Mode and Budget of a start event: how the cycles learn the limit,
	// and what they may send.
	Mode   Mode         `json:"mode,omitempty"`
	Budget *EventBudget `json:"budget,omitempty"`
}

// EventBudget is a Budget as a start event says it.
type EventBudget struct {
	// Share is the declared share of the quota (--budget 2% is 0.02).
	Share float64 `json:"share"`
	// PerCycle is how many budgeted requests a cycle sends.
	PerCycle int `json:"per_cycle"`
	// PerPeriodMax is the most budgeted requests in any interval of the
	// rule's period.
	PerPeriodMax int `json:"per_period_max"`
	// SharePerPeriod is the share of the quota PerPeriodMax is: the share
	// really used, above Share when one request per period is more.
	SharePerPeriod float64 `json:"share_per_period"`
}

// DriftFinding is the policy-drift finding of a drift.
func DriftFinding(d Drift, endpoint string) verify.Finding {
	return verify.Finding{
		ID: IDPolicyDrift, Severity: verify.SeverityError, Certainty: verify.Certain, Endpoint: endpoint,
		Evidence: verify.Evidence{Refs: []string{}},
		Message:  fmt.Sprintf("%s changed from %s to %s (seen in %s)", d.Field, d.Before, d.After, d.Source),
		Hint:     "The limiter's behaviour changed since the watch began: check recent config reloads, deploys and failovers.",
	}
}

// Webhook POSTs events as JSON to a URL. Each POST is bounded: Timeout
// per attempt, at most Attempts attempts (retrying transport errors and
// 5xx answers), redirects not followed, at most 64 KiB of the answer read.
// The zero value is unusable; use NewWebhook.
type Webhook struct {
	url      string
	shown    string // the URL with its secrets redacted, for messages
	client   *http.Client
	Attempts int
	Backoff  time.Duration
}

// NewWebhook returns a webhook for url; red redacts it in messages (nil:
// the default secrets).
func NewWebhook(url string, red *record.Redactor) *Webhook {
	if red == nil {
		red = record.NewRedactor(nil, nil)
	}
	return &Webhook{
		url: url, shown: red.URL(url), Attempts: 3, Backoff: 500 * time.Millisecond,
		client: &http.Client{
			Timeout:       5 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// Post sends ev. The error names the redacted URL.
func (w *Webhook) Post(ctx context.Context, ev Event) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("watch: webhook: %w", err)
	}
	var last error
	for attempt := 0; attempt < max(w.Attempts, 1); attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("watch: webhook %s: %w", w.shown, ctx.Err())
			case <-time.After(w.Backoff << (attempt - 1)):
			}
		}
		retry, err := w.post(ctx, body)
		if err == nil {
			return nil
		}
		last = err
		if !retry {
			break
		}
	}
	return fmt.Errorf("watch: webhook %s: %w", w.shown, last)
}

func (w *Webhook) post(ctx context.Context, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return false, errors.New("invalid URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "rlprobe-watch")
	resp, err := w.client.Do(req)
	if err != nil {
		var ue interface{ Timeout() bool }
		if errors.As(err, &ue) && ue.Timeout() {
			return true, errors.New("timed out")
		}
		return true, errors.New("transport error (target unreachable)")
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return false, nil
	}
	return resp.StatusCode/100 == 5, fmt.Errorf("answered %s", resp.Status)
}
