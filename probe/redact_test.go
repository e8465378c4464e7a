package probe

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

// TestErrorTextRedacted: a transport error that quotes the URL (as
// *url.Error does) is recorded and returned with the URL's secrets
// redacted — the default names and --secret-query ones — while it still
// classifies and unwraps as the original.
func TestErrorTextRedacted(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		raw := "http://a.test/x?API_KEY=S3cr3t&tenant=T3n4nt"
		n := newPipeNet(okHandler(0))
		n.fail = func(int) error { return &url.Error{Op: "Get", URL: raw, Err: refusedErr} }
		e := newTestEngine(t, n, Options{URLs: []string{raw}, Redactor: record.NewRedactor(nil, []string{"tenant"})})
		zero := time.Now()
		results, err := e.Run(t.Context(), zero, zero, steady(1, 0, 0), nil)
		if err == nil || !errors.Is(err, refusedErr) {
			t.Fatalf("Run error = %v, want one wrapping the refusal", err)
		}
		r := results[0]
		for what, text := range map[string]string{"err_msg": r.ErrMsg, "url": r.URL, "returned error": err.Error()} {
			if strings.Contains(text, "S3cr3t") || strings.Contains(text, "T3n4nt") {
				t.Errorf("%s shows a secret: %s", what, text)
			}
		}
		if r.Err != record.ErrRefused || !strings.Contains(r.ErrMsg, record.Fingerprint("S3cr3t")) {
			t.Errorf("result: err %q, err_msg %q; want refused, with the key's fingerprint", r.Err, r.ErrMsg)
		}
		_, _, perr := e.Preflight(t.Context(), zero)
		if perr == nil || strings.Contains(perr.Error(), "S3cr3t") {
			t.Errorf("Preflight error = %v, want one without the secret", perr)
		}
	})
}
