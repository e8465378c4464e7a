package limitconf

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/internal/testenv"
)

// tokenFragments are what generated configs are made of: each input byte
// picks one. They hold every character nginx's tokenizer treats apart
// (quotes, backslash, "$", "{", "}", ";", "#", ")", spaces, CR, LF) in
// words no directive is named after, so that nginx -t refuses a
// generated config only for its syntax or for a directive it does not
// know — both of which the importer, reading with --strict, refuses too.
var tokenFragments = []string{
	"x", "y", "z1", "q", " ", " ", "\t", "\n", "\r\n", ";", ";", "{", "}", "}", `"`, "'",
	`\`, "#", "$", "${", "(", ")", "x}y", `a\"`, `"q"`, "'q'", "$z", "}x", "x{", `\n`, `\;`, "é",
}

const maxFragments = 300

// tokenConf is the configuration a fuzz input makes: its fragments
// inside a types block, where any words are values (nginx's own handler
// reads them: no directive semantics), with what closes the block after.
func tokenConf(data []byte) string {
	var b strings.Builder
	for i, c := range data {
		if i == maxFragments {
			break
		}
		b.WriteString(tokenFragments[int(c)%len(tokenFragments)])
	}
	return typesConf(b.String())
}

// typesConf puts body inside a types block of a whole configuration.
func typesConf(body string) string {
	return "events {}\nhttp {\n  access_log off;\n  types {\n" + body + "\n  }\n}\n"
}

// wordLike writes a random word nginx may well accept: plain, with "}",
// "#", "$", "${…}" or escapes inside, or quoted (with escapes, braces,
// semicolons and newlines inside, and sometimes ")" after it).
func wordLike(rng *rand.Rand, b *strings.Builder) {
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	switch rng.IntN(4) {
	case 0, 1:
		for n := 1 + rng.IntN(3); n > 0; n-- {
			b.WriteString(pick("x", "y", "z1", "q", "é", "x}", "}y", "x#y", "$z", "${y}", `\;`, `\"`, `\ `, "x{", "a)"))
		}
	default:
		q := pick(`"`, "'")
		b.WriteString(q)
		for n := rng.IntN(4); n > 0; n-- {
			b.WriteString(pick("x", " ", `\"`, `\'`, "'", `"`, "}", "{", ";", "#", "\n", "$z", "${y}", `\\`, "\r\n"))
		}
		b.WriteString(q)
		if rng.IntN(4) == 0 {
			b.WriteString(")")
		}
	}
}

// structuredBody writes statements of words, most of them well formed,
// some with a fragment of noise: configs that nginx accepts about half the
// time, and refuses for one slip when it does.
func structuredBody(rng *rand.Rand) string {
	var b strings.Builder
	for n := 1 + rng.IntN(6); n > 0; n-- {
		if rng.IntN(6) == 0 {
			b.WriteString("# x } { ; \\\n")
		}
		for w := 1 + rng.IntN(4); w > 0; w-- {
			if rng.IntN(30) == 0 {
				b.WriteString(tokenFragments[rng.IntN(len(tokenFragments))])
			}
			wordLike(rng, &b)
			b.WriteString([]string{" ", " ", "\t", "\n", "\r\n"}[rng.IntN(5)])
		}
		b.WriteString(";\n")
	}
	return b.String()
}

// tokenCompare runs one generated config through the importer (with
// --strict) and nginx -t, and says how they differ ("" when they agree).
func tokenCompare(t testing.TB, nginx *testenv.NginxChecker, conf string) (accepted bool, diff string) {
	ours, why := ourVerdict(conf, true)
	theirs, out := nginx.Check(t, conf)
	if ours == theirs {
		return ours, ""
	}
	return ours, fmt.Sprintf("we %s (%s), nginx -t %ss: %s\nconfig %q", verdictWord(ours), why, verdictWord(theirs), strings.TrimSpace(out), conf)
}

var tokenSeeds = []string{
	"x y;", `x "q")z;`, "x '$z'\n;", "x${y};", "x}y q;", "x #}\n y;", `x a\";`, `"q" x;`, "x \\;;",
	"x\r\ny;", "x {", "}", ";", `x "q"x;`, "x 'q;", "x \\\n;", "(x) y;", "x '';",
}

// FuzzNginxTokenizer: on generated configs without module directives,
// the importer's tokenizer accepts and refuses as nginx -t does.
//
//	go test ./limitconf -run '^$' -fuzz FuzzNginxTokenizer -fuzztime 60s -parallel 1
func FuzzNginxTokenizer(f *testing.F) {
	nginx := nginxChecker(f)
	if nginx == nil {
		f.Skip("nginx is not installed")
	}
	for _, s := range tokenSeeds {
		f.Add(toFragments(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, diff := tokenCompare(t, nginx, tokenConf(data)); diff != "" {
			t.Fatal(diff)
		}
	})
}

// toFragments writes s as fragment indexes, character by character (a
// character that is no one-byte fragment is dropped).
func toFragments(s string) []byte {
	var out []byte
	for _, r := range s {
		for i, f := range tokenFragments {
			if f == string(r) {
				out = append(out, byte(i))
				break
			}
		}
	}
	return out
}

// TestNginxTokenizerSoak is the fuzz target's soak: random configs (three
// in four of statements made to be well formed, with some noise; one in
// four of raw fragments), up to
// RLPROBE_SOAK_N of them (default 20000) or RLPROBE_SOAK_MINUTES minutes
// (default 10), seeded by RLPROBE_SOAK_SEED (default: the clock, logged).
// It runs only with RLPROBE_SOAK=1.
func TestNginxTokenizerSoak(t *testing.T) {
	if os.Getenv("RLPROBE_SOAK") != "1" {
		t.Skip("a soak: set RLPROBE_SOAK=1")
	}
	nginx := nginxChecker(t)
	if nginx == nil {
		t.Skip("nginx is not installed")
	}
	n := envInt("RLPROBE_SOAK_N", 20000)
	limit := time.Duration(envInt("RLPROBE_SOAK_MINUTES", 10)) * time.Minute
	seed := uint64(envInt("RLPROBE_SOAK_SEED", int(time.Now().UnixNano()&0x7fffffff)))
	rng := rand.New(rand.NewPCG(seed, 1))
	start := time.Now()
	var runs, accepted, diffs int
	for runs < n && time.Since(start) < limit {
		conf := typesConf(structuredBody(rng))
		if runs%4 == 3 { // a quarter of raw fragments
			data := make([]byte, 1+rng.IntN(120))
			for i := range data {
				data[i] = byte(rng.IntN(256))
			}
			conf = tokenConf(data)
		}
		ok, diff := tokenCompare(t, nginx, conf)
		runs++
		if ok && diff == "" {
			accepted++
		}
		if diff != "" {
			diffs++
			if diffs <= 5 {
				t.Errorf("seed %d, run %d: %s", seed, runs, diff)
			}
		}
	}
	t.Logf("seed %d: %d configs in %s, %d accepted and %d refused by both, %d disagreements",
		seed, runs, time.Since(start).Round(time.Second), accepted, runs-accepted-diffs, diffs)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
