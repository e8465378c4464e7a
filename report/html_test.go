package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

// hostileRun is a run whose every text field tries to smuggle a link, a
// script or a stylesheet into the page.
func hostileRun() synth {
	s := fixedWindowRun()
	evil := `"><script src="http://evil.example/x.js"></script><a href="http://evil.example/">x</a><style>@import url(http://evil.example/s.css)</style>`
	s.header.Targets = []string{"http://evil.example/" + evil}
	for i := range s.results {
		s.results[i].Client = "c" + evil[:i%len(evil)]
	}
	doc := s.findings[0].(map[string]any)
	fs := doc["findings"].([]verify.Finding)
	fs[0].Message += evil
	fs[0].Hint = evil
	fs[0].Client = evil
	fs[0].Evidence.Headers = http.Header{"Link": {"<http://evil.example/>; rel=preload"}, "X": {evil}}
	return s
}

// htmlOfRun writes s as a record file, reads it back and renders it.
func htmlOfRun(t *testing.T, s synth) []byte {
	t.Helper()
	in, err := ReadFiles(writeRun(t, t.TempDir(), "run.jsonl", s))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := HTML(&b, in); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// externalRefs tokenises page and returns every place that could fetch
// something: attributes naming a URL that is not a #fragment or data:,
// CSS url() or @import not of data:, and elements that load or run
// anything (script, link, iframe, object, embed, base, meta refresh).
func externalRefs(t *testing.T, page []byte) []string {
	t.Helper()
	var bad []string
	urlAttrs := map[string]bool{"href": true, "src": true, "xlink:href": true, "action": true, "formaction": true,
		"poster": true, "data": true, "srcset": true, "background": true, "ping": true, "cite": true, "longdesc": true}
	local := func(v string) bool {
		v = strings.TrimSpace(v)
		return strings.HasPrefix(v, "#") || strings.HasPrefix(strings.ToLower(v), "data:")
	}
	checkCSS := func(where, css string) {
		low := strings.ToLower(css)
		for _, key := range []string{"url(", "@import", "image-set(", "src("} {
			for i := strings.Index(low, key); i >= 0; {
				rest := strings.TrimLeft(low[i+len(key):], ` "'`)
				if key == "@import" || !strings.HasPrefix(rest, "data:") && !strings.HasPrefix(rest, "#") {
					bad = append(bad, fmt.Sprintf("%s: %s…", where, css[i:min(len(css), i+40)]))
				}
				j := strings.Index(low[i+1:], key)
				if j < 0 {
					break
				}
				i += 1 + j
			}
		}
	}
	z := html.NewTokenizer(bytes.NewReader(page))
	inStyle := false
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return bad
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			name := strings.ToLower(tok.Data)
			switch name {
			case "script", "link", "iframe", "object", "embed", "base", "frame", "img", "image", "use", "audio", "video", "source", "form":
				bad = append(bad, "element <"+name+">")
			case "meta":
				for _, a := range tok.Attr {
					if strings.EqualFold(a.Key, "http-equiv") {
						bad = append(bad, "meta http-equiv")
					}
				}
			}
			for _, a := range tok.Attr {
				key := strings.ToLower(a.Key)
				if a.Namespace != "" {
					key = a.Namespace + ":" + key
				}
				if urlAttrs[key] || strings.HasSuffix(key, ":href") {
					if !local(a.Val) {
						bad = append(bad, fmt.Sprintf("<%s %s=%q>", name, key, a.Val))
					}
				}
				if key == "style" {
					checkCSS("style attribute", a.Val)
				}
				if strings.HasPrefix(key, "on") {
					bad = append(bad, fmt.Sprintf("<%s %s>", name, key))
				}
			}
			inStyle = name == "style"
		case html.EndTagToken:
			inStyle = false
		case html.TextToken:
			if inStyle {
				checkCSS("<style>", string(z.Text()))
			}
		}
	}
}

// TestHTMLSelfContained scans every page for anything that could fetch: no
// src, href, CSS url() or script points anywhere but #… or data:.
func TestHTMLSelfContained(t *testing.T) {
	pages := map[string][]byte{}
	for i, sc := range scenarios {
		var b bytes.Buffer
		if err := HTML(&b, loadScenario(t, i)); err != nil {
			t.Fatal(err)
		}
		pages[sc.name] = b.Bytes()
	}
	pages["hostile"] = htmlOfRun(t, hostileRun())
	if !bytes.Contains(pages["hostile"], []byte("evil.example")) {
		t.Fatal("the hostile text is not on the page at all")
	}
	for name, page := range pages {
		if bad := externalRefs(t, page); len(bad) > 0 {
			t.Errorf("%s: the page can fetch or run something:\n%s", name, strings.Join(bad, "\n"))
		}
		if !bytes.Contains(page, []byte(`href="#moment-`)) && name != "leaky-no-verdict" {
			t.Errorf("%s: no finding links to its moment", name)
		}
	}
}

// TestExternalRefsCatches shows the scanner finds what it looks for.
func TestExternalRefsCatches(t *testing.T) {
	for _, page := range []string{
		`<a href="http://x/">x</a>`,
		`<svg><image xlink:href="http://x/a.png"/></svg>`,
		`<svg><a href="https://x/"><rect/></a></svg>`,
		`<div style="background:url(http://x/a.png)"></div>`,
		`<style>@import "x.css";</style>`,
		`<style>b{background:url( 'http://x/' )}</style>`,
		`<script>fetch("/x")</script>`,
		`<link rel="stylesheet" href="x.css">`,
		`<img src="data:image/png;base64,AAAA">`,
		`<body onload="x()">`,
	} {
		if bad := externalRefs(t, []byte(page)); len(bad) == 0 {
			t.Errorf("externalRefs(%s) found nothing", page)
		}
	}
	if bad := externalRefs(t, []byte(`<a href="#f-1">x</a><div style="background:url(data:image/png;base64,AA)">url(http://text)</div>`)); len(bad) > 0 {
		t.Errorf("externalRefs flags local references: %v", bad)
	}
}

// bigInput builds, in memory, a run of n requests from clients clients
// with findings findings, for size and speed tests.
func bigInput(n, clients, findings int) *Input {
	run := &record.Run{Header: header("big", fixedPolicy, "http://127.0.0.1:8080/api"),
		End: &record.End{Reason: record.ReasonCompleted, Scheduled: int64(n), Sent: int64(n)}}
	run.Results = make([]record.Result, 0, n)
	ra := http.Header{"Retry-After": {"1"}}
	for i := 0; i < n; i++ {
		sent := int64(i) * 997_000 // about 1000/s
		status := 200
		var hdr http.Header
		if (i/7)%3 == 2 {
			status, hdr = 429, ra
		}
		r := response(int64(i), fmt.Sprintf("client-%d", i%clients), sent, int64(1+i%13)*100_000, status, hdr)
		run.Results = append(run.Results, r)
	}
	var fs []verify.Finding
	for i := 0; i < findings; i++ {
		fs = append(fs, verify.Finding{ID: verify.FindingIDs[i%len(verify.FindingIDs)], Severity: "error", Certainty: "certain", Check: "burst",
			Endpoint: "GET /api", Client: fmt.Sprintf("client-%d", i%clients), Message: strings.Repeat("m", 200),
			Evidence: verify.Evidence{Refs: make([]string, 50), StartNS: int64(i) * 1e9, EndNS: int64(i)*1e9 + 5e8, Count: 11}})
	}
	doc, _ := json.Marshal(map[string]any{"schema": verify.SchemaCheck, "tool": "rlprobe x", "verdict": "fail", "complete": true,
		"pass": false, "targets": []string{}, "policy": json.RawMessage(fixedPolicy), "findings": fs})
	run.Findings = []json.RawMessage{doc}
	return FromMerged(record.Merge(run), []string{"big.jsonl"})
}

// TestHTMLSizeBounded: the page stays under 5 MB however large the run,
// and grows little with it (drawing is per pixel column).
func TestHTMLSizeBounded(t *testing.T) {
	sizes := map[int]int{}
	for _, n := range []int{20_000, 200_000} {
		var b bytes.Buffer
		if err := HTML(&b, bigInput(n, 1000, 2000)); err != nil {
			t.Fatal(err)
		}
		sizes[n] = b.Len()
		if b.Len() >= 5<<20 {
			t.Errorf("%d requests: the page is %d bytes, want < 5 MB", n, b.Len())
		}
	}
	if sizes[200_000] > 2*sizes[20_000] {
		t.Errorf("page size grows with the run: %d bytes for 20k requests, %d for 200k", sizes[20_000], sizes[200_000])
	}
	t.Logf("page sizes: %v", sizes)
}

// TestHTMLChromium renders a report with headless Chromium and counts the
// pixels of the accepted and rejected colours in the screenshot. Skipped
// when chromium is missing, unless CI=true.
func TestHTMLChromium(t *testing.T) {
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed (Debian package chromium); CI must install it")
		}
		t.Skip("chromium is not installed (Debian package chromium)")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := HTML(&b, loadScenario(t, 0)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "out.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir="+filepath.Join(dir, "profile"), "--screenshot="+shot,
		"--window-size=1400,900", "file://"+page)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	acc, rej := countColor(img, Accepted.Color()), countColor(img, Rejected.Color())
	t.Logf("screenshot %v: %d accepted-colour pixels, %d rejected-colour pixels", img.Bounds().Size(), acc, rej)
	// The legend's swatches alone are 10×10: the marks must add far more.
	if acc < 400 || rej < 400 {
		t.Errorf("screenshot has %d pixels of the accepted colour and %d of the rejected, want at least 400 each", acc, rej)
	}
}

// countColor counts the pixels within 3 of the colour "#rrggbb" on every
// channel.
func countColor(img image.Image, hex string) int {
	var want [3]int
	fmt.Sscanf(hex, "#%02x%02x%02x", &want[0], &want[1], &want[2])
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			got := [3]int{int(r >> 8), int(g >> 8), int(b >> 8)}
			ok := true
			for i := range got {
				if d := got[i] - want[i]; d > 3 || d < -3 {
					ok = false
				}
			}
			if ok {
				n++
			}
		}
	}
	return n
}

// hostileTexts are what a remote server might send back to break out of
// the page: markup, an attribute, the end of the stylesheet, and U+2028
// (a line terminator in JavaScript; plain text in HTML).
var hostileTexts = []string{
	`<script>alert(1)</script>`,
	`"onmouseover=alert(1) x="`,
	`'onfocus='alert(1)`,
	`</style><style>body{display:none}</style>`,
	"line\u2028separator",
}

// TestHTMLEscapesHostileText: a hostile header value, body text and URL
// reach the page as text, escaped by the template engine: no element or
// attribute comes from them, the stylesheet stays ours, and each still
// reads as it was sent.
func TestHTMLEscapesHostileText(t *testing.T) {
	evil := strings.Join(hostileTexts, " ")
	s := fixedWindowRun()
	s.header.Targets = []string{"http://127.0.0.1:8080/api?q=" + evil}
	for i := range s.results {
		r := &s.results[i]
		r.URL = "http://127.0.0.1:8080/" + evil
		if r.Headers != nil {
			r.Headers.Set("Retry-After", evil) // a header value the server chose
		}
		r.Client = hostileTexts[i%len(hostileTexts)]
		if r.Outcome == record.OutcomeError {
			r.ErrMsg = evil
		}
	}
	doc := s.findings[0].(map[string]any)
	doc["targets"] = s.header.Targets
	fs := doc["findings"].([]verify.Finding)
	fs[0].Message = "the server answered: " + evil // body text quoted in a finding
	fs[0].Endpoint = "GET /" + evil
	fs[0].Client = evil
	fs[0].Evidence.Headers = http.Header{"Ratelimit": {evil}, "X-Note": {evil}}
	page := htmlOfRun(t, s)
	for _, h := range hostileTexts {
		if strings.ContainsAny(h, `<>"'`) && bytes.Contains(page, []byte(h)) {
			t.Errorf("the page holds %q unescaped", h)
		}
	}
	// Parse the page as a browser would: the hostile texts must be text.
	root, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	styles := 0
	for n := range root.Descendants() {
		switch n.Type {
		case html.TextNode:
			texts = append(texts, n.Data)
		case html.ElementNode:
			switch n.Data {
			case "script":
				t.Errorf("the page has a <script> element")
			case "style":
				styles++
				css := ""
				if n.FirstChild != nil {
					css = n.FirstChild.Data
				}
				if !strings.HasPrefix(css, "\n*{box-sizing:border-box}") || strings.Contains(css, "display:none") {
					t.Errorf("the stylesheet is not ours: %.200q", css)
				}
			}
			for _, a := range n.Attr {
				if strings.HasPrefix(strings.ToLower(a.Key), "on") {
					t.Errorf("<%s> has an attribute %s=%q", n.Data, a.Key, a.Val)
				}
			}
		}
	}
	if styles != 1 {
		t.Errorf("the page has %d <style> elements, want 1", styles)
	}
	all := strings.Join(texts, "\n")
	for _, h := range hostileTexts {
		if !strings.Contains(all, h) {
			t.Errorf("%q does not read as text on the page", h)
		}
	}
}

// TestHTMLMarksAboveLanes: SVG paints in document order, so every lane's
// opaque background must come before the request marks it lies under.
func TestHTMLMarksAboveLanes(t *testing.T) {
	var b bytes.Buffer
	if err := HTML(&b, loadScenario(t, 0)); err != nil {
		t.Fatal(err)
	}
	root, err := html.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	lanes, marks, lanesAfterMarks := 0, 0, 0
	for n := range root.Descendants() {
		if n.Type != html.ElementNode {
			continue
		}
		fill := ""
		for _, a := range n.Attr {
			if a.Key == "fill" {
				fill = a.Val
			}
		}
		switch {
		case n.Data == "rect" && fill == colorLane:
			lanes++
			if marks > 0 {
				lanesAfterMarks++
			}
		case n.Data == "path" && (fill == Accepted.Color() || fill == Rejected.Color()):
			marks++
		}
	}
	if lanes == 0 || marks == 0 || lanesAfterMarks > 0 {
		t.Errorf("%d lane backgrounds, %d mark paths, %d backgrounds drawn over marks; want every background first", lanes, marks, lanesAfterMarks)
	}
}
