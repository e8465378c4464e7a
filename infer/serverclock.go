package infer

import (
	"fmt"
	"math"
	"time"

	"github.com/rlprobe/rlprobe/units"
)

// serverEpoch names a timer-aligned answer epoch-aligned when its windows
// start at the target's own epoch. A fixed window aligned to the epoch of
// a server clock offset from this agent's (offset: agent − target) shows
// on this agent's clock as a timer at phase offset mod window, and infer,
// which places epochs on the agent's clock, finds that timer. When the
// answer's phase lies within its own range, widened by the offset's
// uncertainty and the run's timing slack, of that point, the answer is
// the target's epoch window: its alignment becomes epoch, its phase goes
// (an epoch window has none; verify places it on the target's clock) and
// its note says how far the clocks are apart. When that spread covers a
// quarter of the window or more, the clock cannot tell a timer from the
// epoch, and the answer is left as it is.
func serverEpoch(inf *Inference, offset, uncertainty, slack time.Duration) {
	if inf.Alignment == nil || *inf.Alignment != AlignTimer || inf.Params.PhaseS == nil || inf.Params.WindowS == nil {
		return
	}
	w, ph := inf.Params.WindowS.Value, inf.Params.PhaseS
	if !(w > 0) {
		return
	}
	spread := math.Max(ph.High-ph.Value, ph.Value-ph.Low) + (uncertainty + slack).Seconds()
	at := math.Mod(offset.Seconds(), w)
	if at < 0 {
		at += w
	}
	d := math.Mod(math.Abs(ph.Value-at), w)
	d = math.Min(d, w-d)
	if spread >= w/4 || d > spread {
		return
	}
	epoch := AlignEpoch
	inf.Alignment, inf.Params.PhaseS = &epoch, nil
	way := "behind"
	if offset < 0 {
		way = "ahead of"
	}
	inf.Note = joinNote(inf.Note, fmt.Sprintf("windows at the target's epoch, on its clock, which runs %s %s this machine's (± %s, from its Date headers or arrival echo)",
		units.HumanDuration(offset.Abs()), way, units.HumanDuration(uncertainty)))
}
