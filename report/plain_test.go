package report_test

import (
	"strings"
	"testing"

	"github.com/rlprobe/rlprobe/report"
)

func TestFormatMicros(t *testing.T) {
	tests := []struct {
		us   int64
		want string
	}{
		{0, "0s"},
		{850, "850µs"},
		{999, "999µs"},
		{1_000, "1ms"},
		{1_234, "1.2ms"},
		{999_949, "999.9ms"},
		{2_345_678, "2.346s"},
		{61_000_000, "1m1s"},
	}
	for _, tt := range tests {
		if got := report.FormatMicros(tt.us); got != tt.want {
			t.Errorf("FormatMicros(%d) = %q, want %q", tt.us, got, tt.want)
		}
	}
}

func TestWriteTable(t *testing.T) {
	tests := []struct {
		name   string
		header []string
		rows   [][]string
		align  string
		want   string
	}{
		{
			name:   "left and right columns two spaces apart, no edge padding",
			header: []string{"outcome", "status", "count"},
			rows:   [][]string{{"accepted", "200", "5"}, {"rejected", "429", "12"}},
			align:  "llr",
			want: "outcome   status  count\n" +
				"accepted  200         5\n" +
				"rejected  429        12\n",
		},
		{
			name:   "a missing align letter is left; the header is kept as given",
			header: []string{"client", "Sent"},
			rows:   [][]string{{"a", "1"}, {"bb", "100"}},
			align:  "",
			want: "client  Sent\n" +
				"a       1\n" +
				"bb      100\n",
		},
		{
			name:   "a long cell is not wrapped",
			header: []string{"k", "v"},
			rows:   [][]string{{"x", strings.Repeat("word ", 40) + "end"}},
			align:  "ll",
			want:   "k  v\nx  " + strings.Repeat("word ", 40) + "end\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			report.WriteTable(&b, tt.header, tt.rows, tt.align)
			if b.String() != tt.want {
				t.Errorf("WriteTable =\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}
