package record

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestAgentName(t *testing.T) {
	tests := []struct {
		host string
		pid  int
		want string
	}{
		{"ci-runner-7", 4242, "ci-runner-7-4242"},
		{"build.example.com", 17, "build-17"},
		{"MacBook Pro (2)", 901, "MacBook-Pro--2-901"},
		{"", 5, "pid-5"},
		{"...", 5, "pid-5"},
		{"héte", 1, "h-te-1"},
		{strings.Repeat("h", 100), 123456, strings.Repeat("h", MaxAgentLen-7) + "-123456"},
	}
	for _, tt := range tests {
		got := AgentName(tt.host, tt.pid)
		if got != tt.want {
			t.Errorf("AgentName(%q, %d) = %q, want %q", tt.host, tt.pid, got, tt.want)
		}
		if err := CheckAgent(got); err != nil {
			t.Errorf("AgentName(%q, %d) = %q, which CheckAgent refuses: %v", tt.host, tt.pid, got, err)
		}
	}
}

// TestDefaultAgent: the default names this host and this process, never
// the a1 every run used to share.
func TestDefaultAgent(t *testing.T) {
	got := DefaultAgent()
	if got == "a1" || !strings.HasSuffix(got, "-"+strconv.Itoa(os.Getpid())) {
		t.Errorf("DefaultAgent() = %q, want host-%d", got, os.Getpid())
	}
	host, _ := os.Hostname()
	if got != AgentName(host, os.Getpid()) {
		t.Errorf("DefaultAgent() = %q, want AgentName(%q, pid)", got, host)
	}
}

func TestCheckAgent(t *testing.T) {
	for _, ok := range []string{"a1", "eu-west-1", "agent:with:colons", "ü", strings.Repeat("x", MaxAgentLen)} {
		if err := CheckAgent(ok); err != nil {
			t.Errorf("CheckAgent(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "two words", "tab\there", "nl\n", "\x7f", strings.Repeat("x", MaxAgentLen+1), "\xff"} {
		err := CheckAgent(bad)
		if err == nil || !strings.HasPrefix(err.Error(), "record: ") {
			t.Errorf("CheckAgent(%q) = %v, want a record: error", bad, err)
		}
	}
}

// TestMergeKeepsAgentNames: runs recorded as several agents keep their
// names through Merge, in the results and so in refs; two runs of one name
// are told apart without losing it.
func TestMergeKeepsAgentNames(t *testing.T) {
	runs := []*Run{
		{Header: Header{Agent: "eu-1", Start: t0}, Results: []Result{{Seq: 1, Sent: 10}}},
		{Header: Header{Agent: "us-1", Start: t0}, Results: []Result{{Seq: 1, Sent: 20}}},
		{Header: Header{Agent: "eu-1", Start: t0}, Results: []Result{{Seq: 1, Sent: 30}}},
	}
	m := Merge(runs...)
	var refs []string
	for _, r := range m.Results {
		refs = append(refs, Ref(r))
	}
	if got := strings.Join(refs, " "); got != "eu-1:1 us-1:1 eu-1-2:1" {
		t.Errorf("refs %s, want eu-1:1 us-1:1 eu-1-2:1", got)
	}
	for i, a := range m.Agents {
		if a.Header.Agent != runs[i].Header.Agent {
			t.Errorf("agent %d header changed: %q", i, a.Header.Agent)
		}
	}
}
