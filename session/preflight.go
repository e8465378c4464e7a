package session

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// checkedPreflight sends the one request Check and Infer begin with. A transport
// failure, or an answer that is neither accepted nor rejected (401, 404,
// 3xx…), is an Aborted error with the status, the first 200 bytes of the
// body and a hint.
func (e *engine) checkedPreflight(ctx context.Context, declared int) (record.Result, error) {
	res, body, err := e.preflight(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return res, Errorf(Aborted, "interrupted during the preflight request")
		}
		if res.Outcome == "" || res.Outcome == record.OutcomeResponse { // a write failure, or ErrClosed
			return res, err
		}
		hint := "check the URL and that the target is up"
		if res.Err == record.ErrProxy {
			hint = "check the proxy (--proxy, HTTPS_PROXY, HTTP_PROXY), its credentials and the ports it allows CONNECT to, or name the target in NO_PROXY"
		}
		return res, Errorf(Aborted, "preflight: cannot reach %s: %v (%s)\nhint: %s", res.URL, err, res.Err, hint)
	}
	if c, _ := record.Classify(res, declared); c != record.ClassOther {
		return res, nil
	}
	return res, Errorf(Aborted, "preflight: %s answered %d %s, neither accepted nor rejected\nbody: %q\nhint: %s",
		res.URL, res.Status, http.StatusText(res.Status), body, StatusHint(res.Status))
}

// StatusHint suggests what to do about an unexpected status.
func StatusHint(status int) string {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return "the target wants credentials: pass them with -H \"Authorization: Bearer $TOKEN\" (never written to the record)"
	case status == http.StatusNotFound:
		return "check the URL's path"
	case status == http.StatusMethodNotAllowed:
		return "the target refuses this method: see -X"
	case status >= 300 && status < 400:
		return "rlprobe never follows redirects: probe the final URL instead"
	case status >= 500:
		return "the target is failing; if it rejects with this status by design, declare it with --status"
	}
	return "probe a URL that answers 2xx when under its limit"
}

// waitStart waits until Config.StartAt, when set, saying so through
// Progress.Line. Check and Infer call it right before their first request,
// the preflight. It fails (Aborted) when ctx ends first.
func (s *Session) waitStart(ctx context.Context) error {
	at := s.cfg.StartAt
	if at.IsZero() {
		return nil
	}
	s.line("waiting until --start-at %s", at.Format(time.RFC3339Nano))
	timer := time.NewTimer(time.Until(at))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return Errorf(Aborted, "interrupted before --start-at")
	}
}

// restAfterRefusal waits, when the preflight pre was refused, until every
// quota of pol has surely come back whole (verify.Endpoint.Fresh, the
// longest), so that the suites start from rest: a limiter that refuses the
// run's first request is busy (an earlier run's requests, or others'), and
// the counts check judges take each quota as whole when the suites begin.
// The rest is at most --max-duration. With --start-at it does not wait
// (agents given the same time start together) and says so. rested reports
// that it waited.
func (s *Session) restAfterRefusal(ctx context.Context, pre record.Result, declared int, pol *verify.Policy) (rested bool, err error) {
	if c, _ := record.Classify(pre, declared); c != record.ClassRejected {
		return false, nil
	}
	var rest time.Duration
	for i := range pol.Endpoints {
		rest = max(rest, pol.Endpoints[i].Fresh())
	}
	if rest <= 0 {
		return false, nil
	}
	// A long window's rest is bounded like the run: by --max-duration.
	if m := s.cfg.Caps.MaxDuration; m > 0 {
		rest = min(rest, m)
	}
	if !s.cfg.StartAt.IsZero() {
		s.line("warning: the preflight was refused: the limiter is busy, and with --start-at the suites start at once (not from rest)")
		return false, nil
	}
	s.line("check: the preflight was refused: the limiter is busy (an earlier run's requests, or others'); resting %s, until a whole quota has surely come back, before the suites", units.HumanDuration(rest))
	timer := time.NewTimer(rest)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true, nil
	case <-ctx.Done():
		return false, Errorf(Aborted, "interrupted while resting after a refused preflight")
	}
}

// otherError is the error of a session the "other" guard stopped
// (aborted), or that ended with too many "other" answers.
func (s *Session) otherError(aborted bool) error {
	c := &s.counts
	c.mu.Lock()
	codes := make([]int, 0, len(c.otherStatus))
	for code := range c.otherStatus {
		codes = append(codes, code)
	}
	sort.Ints(codes)
	var parts []string
	top, n := 0, 0
	for _, code := range codes {
		k := c.otherStatus[code]
		parts = append(parts, fmt.Sprintf("%d ×%d", code, k))
		if k > n {
			top, n = code, k
		}
	}
	c.mu.Unlock()
	answers := c.accepted.Load() + c.rejected.Load() + c.other.Load()
	report := fmt.Sprintf("%d of %d answers were neither accepted (2xx) nor rejected (429, 503): %s",
		c.other.Load(), answers, strings.Join(parts, ", "))
	if aborted {
		return Errorf(Aborted, "aborted: %s%s\nhint: %s", report, s.where(), StatusHint(top))
	}
	return Errorf(Aborted, "%s\nhint: %s", report, StatusHint(top))
}

// endError maps the error that ended a Run or Infer to the record's end
// reason and the operation's error: Aborted for interrupted, aborted and
// budget (saying how far it got), Usage for a schedule the engine refused.
func (s *Session) endError(err error, done, total int64) (string, error) {
	where := s.where()
	switch {
	case err == nil:
		return record.ReasonCompleted, nil
	case errors.Is(err, probe.ErrInterrupted):
		return record.ReasonInterrupted, Errorf(Aborted, "interrupted after %d of %d requests%s", done, total, where)
	case errors.Is(err, probe.ErrBudget):
		return record.ReasonBudget, Errorf(Aborted, "budget spent after %d of %d requests%s", done, total, where)
	case errors.Is(err, probe.ErrAborted):
		return record.ReasonAborted, Errorf(Aborted, "%v (after %d of %d requests)%s", err, done, total, where)
	case errors.Is(err, probe.ErrUsage):
		return record.ReasonAborted, WithClass(Usage, err)
	}
	return record.ReasonAborted, Errorf(Aborted, "%v%s", err, where)
}

// suiteError maps the check suite's error to the record's end reason and
// the operation's error. ctx is the caller's context: a deadline that is
// not its own is the duration budget.
func (s *Session) suiteError(ctx context.Context, err error) (string, error) {
	where := s.where()
	switch {
	case err == nil:
		return record.ReasonCompleted, nil
	case errors.Is(err, probe.ErrUsage):
		return record.ReasonAborted, WithClass(Usage, err)
	case errors.Is(err, verify.ErrBudget):
		return record.ReasonBudget, Errorf(Aborted, "%v%s", err, where)
	case errors.Is(err, probe.ErrBudget) || (errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil):
		return record.ReasonBudget, Errorf(Aborted, "budget spent (--max-duration) before the suite finished%s", where)
	case errors.Is(err, probe.ErrInterrupted) || ctx.Err() != nil:
		return record.ReasonInterrupted, Errorf(Aborted, "interrupted before the suite finished%s", where)
	}
	return record.ReasonAborted, Errorf(Aborted, "%v%s", err, where)
}

// where names the record file in an error, when there is one.
func (s *Session) where() string {
	if s.rec == nil || s.rec.path == "" {
		return ""
	}
	return "; the results so far are in " + s.rec.path
}
