package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
)

// WriteRun prints the plain-text form of a run document: what was sent
// where, in how long and how it ended, the summary (WriteRunSummary) and
// the record file.
func WriteRun(w io.Writer, doc *record.RunDoc, lateThreshold time.Duration) error {
	fmt.Fprintf(w, "rlprobe run: %d of %d requests sent to %s in %s (%s)\n\n", doc.Sent, doc.Scheduled,
		strings.Join(doc.Targets, ", "), units.HumanDuration(units.Seconds(doc.DurationS)), doc.Reason)
	if err := WriteRunSummary(w, doc.RunSummary, lateThreshold); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "record file: %s\n", doc.RecordFile)
	return err
}

// WriteRunSummary prints the plain-text summary `rlprobe run` ends with:
// the outcomes by status with their latency, the clients when there are
// several, the pacing error (late: sent more than lateThreshold after
// schedule) and the races.
func WriteRunSummary(w io.Writer, sum record.RunSummary, lateThreshold time.Duration) error {
	us := FormatMicros
	rows := [][]string{}
	codes := slices.Sorted(maps.Keys(sum.Statuses))
	for _, c := range codes {
		code, _ := strconv.Atoi(c)
		d := sum.Latency[c]
		class, _ := record.ClassifyStatus(code, 0, nil)
		rows = append(rows, []string{string(class), c, strconv.Itoa(sum.Statuses[c]),
			us(d.P50US), us(d.P90US), us(d.P99US), us(d.MaxUS)})
	}
	for _, k := range slices.Sorted(maps.Keys(sum.ErrorClasses)) {
		rows = append(rows, []string{"error", k, strconv.Itoa(sum.ErrorClasses[k]), "", "", "", ""})
	}
	for _, k := range slices.Sorted(maps.Keys(sum.NotSentReasons)) {
		rows = append(rows, []string{"not-sent", k, strconv.Itoa(sum.NotSentReasons[k]), "", "", "", ""})
	}
	WriteTableFrom(w, []string{"outcome", "status", "count", "p50", "p90", "p99", "max"}, rows, 2)
	fmt.Fprintln(w)
	if len(sum.Clients) > 1 {
		rows = rows[:0]
		for _, c := range sum.Clients {
			rows = append(rows, []string{c.Client, strconv.Itoa(c.Sent), strconv.Itoa(c.Accepted), strconv.Itoa(c.Rejected),
				strconv.Itoa(c.Other), strconv.Itoa(c.Errors), strconv.Itoa(c.NotSent)})
		}
		WriteTableFrom(w, []string{"client", "sent", "accepted", "rejected", "other", "errors", "not-sent"}, rows, 1)
		fmt.Fprintln(w)
	}
	p := sum.Pacing
	fmt.Fprintf(w, "pacing error (sent − scheduled): p50 %s, p99 %s, max %s; late (> %v): %d of %d\n",
		us(p.P50US), us(p.P99US), us(p.MaxUS), lateThreshold, sum.Late, sum.Sent)
	if sum.Races > 0 {
		races := "1 release"
		if sum.Races != 1 {
			races = strconv.Itoa(sum.Races) + " releases"
		}
		fmt.Fprintf(w, "races: %s; client spread p50 %s, max %s", races, us(sum.RaceWroteSpread.P50US), us(sum.RaceWroteSpread.MaxUS))
		if a := sum.RaceArrivalSpread; a.Count > 0 {
			fmt.Fprintf(w, "; server arrival spread p50 %s, max %s", us(a.P50US), us(a.MaxUS))
		} else {
			fmt.Fprint(w, "; no server arrival echo (serve --echo-arrival gives one)")
		}
		fmt.Fprintln(w)
	}
	return nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
