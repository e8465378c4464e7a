package record

import (
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rlprobe/rlprobe/problem"
)

// MaxAgentLen is the longest agent name CheckAgent accepts, in bytes.
const MaxAgentLen = 64

// DefaultAgent is the agent name of a run not given one (`--agent`): this
// host's short name and the process id, as AgentName makes them, so that
// files recorded on several machines, or by several processes on one,
// keep telling their agents apart once merged.
func DefaultAgent() string {
	host, _ := os.Hostname()
	return AgentName(host, os.Getpid())
}

// AgentName is the default agent name for a host and a process id:
// "HOST-PID", the host cut at its first dot and reduced to letters, digits,
// '-' and '_' (others become '-'), at most MaxAgentLen bytes in all; "pid-PID"
// when the host name is empty. It is a pure function.
func AgentName(host string, pid int) string {
	suffix := "-" + strconv.Itoa(pid)
	host, _, _ = strings.Cut(host, ".")
	var b strings.Builder
	for _, r := range host {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	h := strings.Trim(b.String(), "-")
	if h == "" {
		h = "pid"
	}
	if len(h)+len(suffix) > MaxAgentLen {
		h = h[:MaxAgentLen-len(suffix)]
	}
	return h + suffix
}

// CheckAgent reports whether name can name an agent: non-empty, at most
// MaxAgentLen bytes of printable UTF-8 without spaces, so that refs
// ("agent:seq") stay one word. The error, a *problem.Error, says what is
// wrong.
func CheckAgent(name string) error {
	switch {
	case name == "":
		return problem.New("record", "", "an agent name cannot be empty")
	case len(name) > MaxAgentLen:
		return problem.New("record", "", "agent name %q is longer than %d bytes", name, MaxAgentLen)
	case !utf8.ValidString(name):
		return problem.New("record", "", "agent name %q is not UTF-8", name)
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == '\u00a0' {
			return problem.New("record", "", "agent name %q has a space or control character", name)
		}
	}
	return nil
}
