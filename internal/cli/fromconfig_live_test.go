package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/internal/testenv"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
)

// liveNginxConf limits /api/items to 2r/s, burst 3, nodelay: a token
// bucket of rate 2/s and capacity 4, rejecting with 503.
const liveNginxConf = `events {}
http {
    access_log off;
    limit_req_zone $binary_remote_addr zone=items:1m rate=%RATE%;
    server {
        listen 127.0.0.1:{{PORT}};
        location = /api/items {
            limit_req zone=items burst=%BURST% nodelay;
            try_files /.no-such-file @ok;
        }
        location @ok {
            return 200 "ok\n";
        }
    }
}
`

// liveTraefikConf is a Traefik file-provider config limiting /api/items
// to an average of 2 per second with a burst of 4: a token bucket of rate
// 2/s and capacity 4, rejecting with 429.
const liveTraefikConf = `http:
  routers:
    items:
      rule: "Path(` + "`/api/items`" + `)"
      service: app
      middlewares:
        - items-limit
  services:
    app:
      loadBalancer:
        servers:
          - url: "http://127.0.0.1:9000"
  middlewares:
    items-limit:
      rateLimit:
        average: 2
        burst: 4
`

// startItemsServer serves /api/items with a token bucket of rate and
// capacity, rejecting with status, on a loopback port (the reference
// server of rlprobe serve, in process).
func startItemsServer(t *testing.T, rate float64, capacity int64, status int) string {
	t.Helper()
	pol := testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.TokenBucket, Rate: rate, Capacity: capacity},
		Status: status, Dialects: []headers.Dialect{headers.None}}
	srv, err := testserver.New(testserver.Config{Routes: []testserver.Route{{Path: "/api/items", Policy: pol}}, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv.URL()
}

func nginxItems(rate, burst string) string {
	return strings.NewReplacer("%RATE%", rate, "%BURST%", burst).Replace(liveNginxConf)
}

// TestCheckFromConfigInfers: check --from-config infers each location
// after its suite and holds the inference against the config: the
// reference server and real nginx serving what an nginx file and a
// Traefik file declare pass (no config-mismatch that is certain), the
// same configs against a limiter of half the rate are a certain
// config-mismatch (exit 1) naming the config line, and a --max-duration
// that holds the suite but not the inference lists the location as not
// inferred (complete: false, exit 3).
func TestCheckFromConfigInfers(t *testing.T) {
	t.Parallel() // long, real time and mostly waiting: it overlaps the other long ones
	if testing.Short() {
		t.Skip("checks and infers live (about 90 s)")
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The config files as rlprobe reads them (the listen port does not
	// matter: the base URL says where to probe).
	nginxFile := write("items.conf", strings.ReplaceAll(nginxItems("2r/s", "3"), testenv.PortPlaceholder, "8080"))
	nginxOther := write("other.conf", strings.ReplaceAll(nginxItems("5r/s", "9"), testenv.PortPlaceholder, "8080"))
	traefikFile := write("traefik.yaml", liveTraefikConf)

	realNginx := testenv.StartNginx(t, nginxItems("2r/s", "3"))
	tests := []struct {
		name, base, config string
		args               []string
		want               int // exit code
		mismatch           bool
	}{
		{"nginx file, serve as declared", startItemsServer(t, 2, 4, 503), nginxFile, nil, ExitOK, false},
		{"nginx file, serve at half the rate", startItemsServer(t, 1, 4, 503), nginxFile, nil, ExitFindings, true},
		{"traefik file, serve as declared", startItemsServer(t, 2, 4, 429), traefikFile, nil, ExitOK, false},
		{"traefik file, serve at half the rate", startItemsServer(t, 1, 4, 429), traefikFile, nil, ExitFindings, true},
		{"real nginx, its own file", realNginx, nginxFile, nil, ExitOK, false},
		{"real nginx, another file", realNginx, nginxOther, nil, ExitFindings, true},
		{"inference beyond --max-duration", startItemsServer(t, 2, 4, 503), nginxFile, []string{"--max-duration", "40s"}, ExitUnreachable, false},
	}
	type result struct {
		code           int
		stdout, stderr string
		out            string
	}
	results := make([]result, len(tests))
	testenv.BuildRlprobe(t) // the checks infer: through the built binary (runBuilt)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2) // infer's timing wants a machine not too busy
	for i, tt := range tests {
		if tt.name == "real nginx, another file" {
			continue // after its own file, on the same nginx
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			r := &results[i]
			r.out = filepath.Join(dir, "check-"+string(rune('a'+i))+".jsonl")
			args := append([]string{"check", tt.base, "--from-config", tt.config, "--only", "burst", "--json", "--out", r.out}, tt.args...)
			r.code, r.stdout, r.stderr = runBuilt(t, args...)
			if tt.name == "real nginx, its own file" {
				time.Sleep(5 * time.Second) // nginx's bucket whole again
				j := i + 1
				rj := &results[j]
				rj.out = filepath.Join(dir, "check-"+string(rune('a'+j))+".jsonl")
				rj.code, rj.stdout, rj.stderr = runBuilt(t, "check", tests[j].base, "--from-config", tests[j].config, "--only", "burst", "--json", "--out", rj.out)
			}
		})
	}
	wg.Wait()
	sch := compileDocSchema(t, "check.schema.json")
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := results[i]
			var rep verify.Report
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("exit %d, not a check document: %v\n%s%s", r.code, err, r.stdout, r.stderr)
			}
			mustValidate(t, sch, "check --from-config --json", r.stdout)
			var mismatch []verify.Finding
			for _, f := range rep.Findings {
				if f.ID == verify.IDConfigMismatch {
					mismatch = append(mismatch, f)
				}
			}
			inferences := recordInferences(t, r.out)
			// A mismatch is certain only against an exact, complete fit.
			// Over real sockets on a loaded machine the inference may end
			// approximate (its validation not passed): then the honest
			// verdict is a possible mismatch and exit 0, which is what is
			// asserted for that run.
			exact := len(inferences) == 1 && strings.Contains(inferences[0], " exact complete ")
			want := tt.want
			if tt.mismatch && !exact {
				t.Logf("the inference is not exact (%s): the mismatch can only be possible", inferences)
				want = ExitOK
			}
			if r.code != want {
				t.Errorf("exit %d, want %d; findings %+v; inferences %s\n%s", r.code, want, rep.Findings, inferences, r.stderr)
			}
			switch {
			case tt.want == ExitUnreachable:
				if rep.Complete || len(inferences) != 0 || !strings.Contains(r.stderr, "not inferred") || len(mismatch) != 0 {
					t.Errorf("complete %v, %d inferences, mismatch %+v: want an incomplete verdict, no inference, a line saying so\n%s", rep.Complete, len(inferences), mismatch, r.stderr)
				}
			case tt.mismatch:
				wantCert := map[bool]verify.Certainty{true: verify.Certain, false: verify.Possible}[exact]
				if len(mismatch) == 0 || mismatch[0].Certainty != wantCert || !strings.Contains(mismatch[0].Message, filepath.Base(tt.config)+":") {
					t.Errorf("config-mismatch %+v: want a %s one naming the config line; inferences %s", mismatch, wantCert, inferences)
				}
			default:
				if len(inferences) != 1 || !rep.Complete || rep.Verdict != verify.VerdictPass {
					t.Errorf("%d inferences, complete %v, verdict %s: want one inference, a complete pass\n%s", len(inferences), rep.Complete, rep.Verdict, r.stderr)
				}
				for _, f := range mismatch {
					if f.Certainty == verify.Certain {
						t.Errorf("a certain config-mismatch where the config is what is served: %+v; inferences %s", f, inferences)
					}
				}
			}
		})
	}
}

// recordInferences returns the inference documents of a record file, each
// as "algorithm fit complete params".
func recordInferences(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	run, err := record.Read(f)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var out []string
	for _, raw := range run.Inferences {
		var d struct {
			Algorithm *string         `json:"algorithm"`
			Fit       string          `json:"fit"`
			Complete  bool            `json:"complete"`
			Params    json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		alg := "null"
		if d.Algorithm != nil {
			alg = *d.Algorithm
		}
		out = append(out, strings.Join([]string{alg, d.Fit, map[bool]string{true: "complete", false: "incomplete"}[d.Complete], string(d.Params)}, " "))
	}
	return out
}
