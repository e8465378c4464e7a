package limitconf

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rlprobe/rlprobe/internal/testenv"
)

// The realistic configurations (testdata/realistic): each file directly
// in the directory is a configuration to lint, its includes in the
// directories beside it. Its comments say how to read it and what lint
// must find:
//
//	# run: ARGS                 a lint run with these config flags (--set,
//	                            --env, --root, --server, --format); the
//	                            expectations below it are that run's
//	# expect: ID CERTAINTY [FILE] line N
//	                            a finding, in FILE (relative to the
//	                            directory; default this file)
//	# expect-error: TEXT        the run fails with an error holding TEXT
//
// Every finding must be expected and every expectation found: no finding
// beyond the expected ones. An nginx file must also pass nginx -t, with
// its run's substitutions and root, for every run that expects no
// placeholder-unset, not-interpreted or error.
const realisticDir = "testdata/realistic"

type realisticRun struct {
	args    []string
	src     ConfigSource
	expect  []string
	wantErr string
}

func realisticRuns(t *testing.T, name, text string) []*realisticRun {
	t.Helper()
	var runs []*realisticRun
	cur := func() *realisticRun {
		if len(runs) == 0 {
			runs = append(runs, &realisticRun{})
		}
		return runs[len(runs)-1]
	}
	for i, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "# run:"):
			r := &realisticRun{args: strings.Fields(strings.TrimPrefix(l, "# run:"))}
			for j := 0; j < len(r.args); j += 2 {
				if j+1 >= len(r.args) {
					t.Fatalf("%s:%d: %q wants a value", name, i+1, r.args[j])
				}
				v := r.args[j+1]
				switch r.args[j] {
				case "--set":
					r.src.Set = append(r.src.Set, v)
				case "--env":
					r.src.Env = append(r.src.Env, filepath.Join(realisticDir, v))
				case "--root":
					r.src.Root = filepath.Join(realisticDir, v)
				case "--server":
					r.src.Server = v
				case "--format":
					r.src.Format = v
				default:
					t.Fatalf("%s:%d: unknown flag %q", name, i+1, r.args[j])
				}
			}
			runs = append(runs, r)
		case strings.HasPrefix(l, "# expect:"):
			f := strings.Fields(strings.TrimPrefix(l, "# expect:"))
			file := name
			if len(f) == 5 {
				file = f[2]
				f = []string{f[0], f[1], f[3], f[4]}
			}
			if len(f) != 4 || f[2] != "line" {
				t.Fatalf("%s:%d: want # expect: ID CERTAINTY [FILE] line N", name, i+1)
			}
			cur().expect = append(cur().expect, f[0]+" "+f[1]+" "+file+":"+f[3])
		case strings.HasPrefix(l, "# expect-error:"):
			cur().wantErr = strings.TrimSpace(strings.TrimPrefix(l, "# expect-error:"))
		}
	}
	return runs
}

// TestRealisticConfigs: lint finds in each realistic configuration what
// its comments expect, no more, and nginx -t accepts the nginx ones.
func TestRealisticConfigs(t *testing.T) {
	entries, err := os.ReadDir(realisticDir)
	if err != nil {
		t.Fatal(err)
	}
	nginx := nginxChecker(t)
	files := 0
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), ".env") {
			continue
		}
		files++
		name := e.Name()
		path := filepath.Join(realisticDir, name)
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, run := range realisticRuns(t, name, string(text)) {
			im, err := run.src.Read(nil, path)
			if run.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), run.wantErr) {
					t.Errorf("%s run %d %v: err %v, want %q", name, i, run.args, err, run.wantErr)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s run %d %v: %v", name, i, run.args, err)
				continue
			}
			var got []string
			for _, f := range im.Findings {
				rel, _ := filepath.Rel(realisticDir, f.Source.File)
				got = append(got, f.ID+" "+string(f.Certainty)+" "+rel+":"+strconv.Itoa(f.Source.Line))
			}
			slices.Sort(got)
			want := slices.Clone(run.expect)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s run %d %v:\n got  %s\n want %s", name, i, run.args, strings.Join(got, "\n      "), strings.Join(want, "\n      "))
				for _, f := range im.Findings {
					t.Logf("  %s", f.Message)
				}
			}
			if im.Format == Nginx && nginx != nil && run.nginxAccepts() {
				checkRealisticNginx(t, nginx, name, run)
			}
		}
	}
	if files < 6 {
		t.Errorf("%d realistic configurations, want at least 6", files)
	}
}

// nginxAccepts reports whether nginx should accept the run's config:
// nothing left unread, no unknown directive, no error.
func (r *realisticRun) nginxAccepts() bool {
	for _, e := range r.expect {
		if strings.HasPrefix(e, IDPlaceholderUnset+" ") || strings.HasPrefix(e, IDNotInterpreted+" ") || strings.HasPrefix(e, IDIncludeMissing+" ") {
			return false
		}
	}
	return r.wantErr == ""
}

// checkRealisticNginx runs nginx -t on a copy of the realistic directory
// with the run's substitutions made and its root's absolute includes
// pointing into the copy; a snippet (no events block) is included from
// a whole nginx.conf. A file with Lua blocks needs lua-nginx-module, and
// is skipped ("module absent") without it.
func checkRealisticNginx(t *testing.T, nginx *testenv.NginxChecker, name string, run *realisticRun) {
	t.Helper()
	o, err := run.src.options()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "realistic")
	root := ""
	if run.src.Root != "" {
		rel, _ := filepath.Rel(realisticDir, run.src.Root)
		root = filepath.Join(dir, rel)
	}
	lua := false
	err = filepath.WalkDir(realisticDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(realisticDir, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		data = substitute(data, o.Vars)
		if root != "" {
			data = []byte(strings.ReplaceAll(string(data), "include /etc/nginx/", "include "+root+"/etc/nginx/"))
		}
		if rel == name && strings.Contains(string(data), "_by_lua") {
			lua = true
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if lua {
		if _, ok := testenv.NginxLuaModules(t); !ok {
			t.Logf("%s: nginx -t not run: module absent (lua-nginx-module)", name)
			return
		}
	}
	main := filepath.Join(dir, name)
	if data, _ := os.ReadFile(main); !strings.Contains(string(data), "events {") {
		wrap := filepath.Join(dir, "wrap-"+name)
		os.WriteFile(wrap, []byte("events {}\nhttp {\n    access_log off;\n    include "+main+";\n}\n"), 0o644)
		main = wrap
	}
	if ok, out := nginx.CheckFile(t, main); !ok {
		t.Errorf("%s %v: nginx -t refuses it: %s", name, run.args, out)
	}
}
