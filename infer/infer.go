package infer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/record"
)

// Schema is the value of the "schema" member of the infer document.
const Schema = "rlprobe.infer/v1"

// Family is an inferred algorithm family. The spellings are the contract's.
type Family string

// The families infer can report.
const (
	// FixedWindow: N requests per window of length W; windows aligned to the
	// Unix epoch or started by a key's first request.
	FixedWindow Family = "fixed-window"
	// SlidingLog: N accepted (or counted) requests in any interval of
	// length W, exactly.
	SlidingLog Family = "sliding-log"
	// SlidingWindowCounter: the weighted estimate of the previous and the
	// current fixed window (Cloudflare, HAProxy).
	SlidingWindowCounter Family = "sliding-window-counter"
	// TokenBucket: capacity C refilled continuously at rate r. GCRA and
	// nginx limit_req with nodelay decide identically and are reported so.
	TokenBucket Family = "token-bucket"
	// LeakyBucketQueue: accepted requests beyond the first few are delayed,
	// one per 1/r (nginx limit_req without nodelay).
	LeakyBucketQueue Family = "leaky-bucket-queue"
	// None: no limiting observed.
	None Family = "none"
)

// Families lists every family in the contract's order.
var Families = []Family{FixedWindow, SlidingLog, SlidingWindowCounter, TokenBucket, LeakyBucketQueue, None}

// ParseFamily returns the Family spelled s, or an error naming the valid
// spellings. The error is the message alone (it names what it parsed), so
// that a caller puts it under its own flag or field.
func ParseFamily(s string) (Family, error) {
	for _, f := range Families {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown family %q; one of %s", s, strings.Join(FamilyNames(), ", "))
}

// MarshalJSON writes a Family as its spelling, and the empty Family (no
// family fits: fit misfit) as null.
func (f Family) MarshalJSON() ([]byte, error) {
	if f == "" {
		return []byte("null"), nil
	}
	return []byte(`"` + string(f) + `"`), nil
}

// UnmarshalJSON reads a Family's spelling, and null as the empty Family.
func (f *Family) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = ""
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("infer: family: %w", err)
	}
	*f = Family(s)
	return nil
}

// Fit says how far an answer is to be trusted (the contract's "fit").
type Fit string

// The fits.
const (
	// FitExact: the answer reproduces what was observed and, after it was
	// fitted, predicted the outcome of a validation experiment it was not
	// fitted on (the one where it and its runner-up disagree most, or a
	// fresh exhaust-and-recover at another phase); the family none is
	// always exact.
	FitExact Fit = "exact"
	// FitApproximate: the answer reproduces what was observed (within the
	// misses that timing noise explains) but has not survived a validation
	// experiment: the budget ended first, or its prediction failed and the
	// refitted answer was not validated again.
	FitApproximate Fit = "approximate"
	// FitMisfit: no candidate reproduces the outcomes beyond what the
	// timing the evidence allows explains: Algorithm is empty (JSON null),
	// Closest names the nearest family and Misses what it fails to
	// reproduce.
	FitMisfit Fit = "misfit"
)

// Miss is an observed outcome the answer (or, for a misfit, the closest
// family's best model) does not reproduce.
type Miss struct {
	// Experiment names the experiment and when it ran ("comb at 3.2s").
	Experiment string `json:"experiment"`
	// Expected is what the model predicts ("2 of 5 accepted"), Observed
	// what the target did ("5 of 5 accepted").
	Expected string `json:"expected"`
	Observed string `json:"observed"`
}

// ClosestPhrase names what comes closest to the outcomes for a message
// about a misfit: "closest F", or "no model is left" when every hypothesis
// was ruled out (Closest empty).
func (inf *Inference) ClosestPhrase() string {
	if inf.Closest == "" {
		return "no model is left"
	}
	return "closest " + string(inf.Closest)
}

// FamilyNames returns the spellings of Families, in their order.
func FamilyNames() []string {
	names := make([]string, len(Families))
	for i, f := range Families {
		names[i] = string(f)
	}
	return names
}

// Alignments and keys as reported (contract names).
const (
	AlignEpoch        = "epoch"
	AlignFirstRequest = "first-request"
	AlignTimer        = "timer" // windows on the limiter's own timer, at params.phase_s
	AlignUnknown      = "unknown"

	KeyGlobal  = "global"
	KeyUnknown = "unknown"
)

// Defaults of Options.
const (
	DefaultMaxRequests = 5000
	DefaultMaxDuration = 10 * time.Minute
	// DefaultMaxWindow is the longest window (or bucket refill time) the
	// experiments are sized for; the budget 6·W + 30 s holds up to it.
	DefaultMaxWindow = 60 * time.Second
	// DefaultLead is the default Options.Lead.
	DefaultLead = 20 * time.Millisecond
	// DefaultMaxRate is the default Options.MaxRate (the probe's
	// --max-rate default).
	DefaultMaxRate = 1000.0
)

// Engine runs a schedule against the target and returns one result per
// send. It is the only way infer reaches the network: the CLI hands it the
// probe engine, tests a model of a server.
//
// Result times are nanoseconds since one fixed origin (the record header's
// Start, Options.Origin) for every Run on the same Engine, so results of
// successive Runs share a timeline. A schedule with a non-zero Start is due
// at that absolute instant; Run returns when every send has a result.
// Run returns the results recorded so far together with an error when it
// stops early (context cancelled, run aborted).
type Engine interface {
	Run(ctx context.Context, s patterns.Schedule) ([]record.Result, error)
}

// Options configure Infer. The zero value works with an Engine whose origin
// is the zero time and a single client identity.
type Options struct {
	// Origin is the absolute instant that result time 0 stands for (the
	// record header's Start). Epoch alignment is judged against it.
	Origin time.Time
	// Now reads the clock used to plan experiments; nil means time.Now.
	Now func() time.Time
	// Clients is how many client identities the engine can present
	// (Send.Client 0…Clients−1). With 2 or more, infer tests whether the
	// limit is per client.
	Clients int
	// KeyName is the contract key name the identities vary ("ip",
	// "header:X-Api-Key"), reported when the limit proves per client;
	// empty reports "unknown".
	KeyName string
	// RejectStatus is the declared reject status; 0 means none declared.
	// 429 and 503 are rejections either way (record.Classify).
	RejectStatus int
	// MaxRequests caps the requests infer sends; 0 means DefaultMaxRequests.
	MaxRequests int
	// MaxDuration caps the time infer runs; 0 means DefaultMaxDuration.
	MaxDuration time.Duration
	// MaxWindow is the longest window the experiments look for; 0 means
	// DefaultMaxWindow.
	MaxWindow time.Duration
	// Prior holds results sent before Infer on the same timeline (the
	// preflight request): they are replayed through every model too.
	Prior []record.Result
	// OnBudget, when set, is called as soon as the time scale W is known,
	// with W and the time budget (6·W + 30 s, capped by MaxDuration)
	// counted from the start of Infer; and again, with the new total,
	// whenever the budget is extended (a validation that failed, or found
	// no room, designs again; instances found restart the fit on one
	// connection after a rest, and 6·W + 30 s counts from there).
	OnBudget func(window, budget time.Duration)
	// OnPhase, when set, is called as each experiment starts, with its name
	// and the requests sent so far.
	OnPhase func(phase string, sent int)
	// Lead is how far ahead of the clock experiments are planned: enough
	// for the engine to prepare its connections. 0 means DefaultLead.
	Lead time.Duration
	// Timeout is the engine's per-request timeout; 0 means 10 s. A queue
	// that only delays is never made to hold a request longer than half of
	// it, so that its answers come back before they time out.
	Timeout time.Duration
	// MaxRate is the highest rate (per second) of a steady stream infer
	// offers; 0 means DefaultMaxRate.
	MaxRate float64
	// Tool is the "tool" member of the document ("rlprobe v1.2.3").
	Tool string
	// Without leaves behaviours out of the candidates: the leave-one-out
	// test of the fit (a limiter whose behaviour has no model must come
	// out approximate or misfit, never exact). Empty for real use.
	Without []Behaviour
	// ServerClock, when set, returns this agent's clock offset from the
	// target's (agent − target) and its half-width as the answers so far
	// place it (their Date headers or arrival echoes), and false when they
	// place nothing. A window on a timer that ticks at the target's own
	// epoch is then named epoch-aligned (serverEpoch).
	ServerClock func() (offset, uncertainty time.Duration, ok bool)
}

// Behaviour names what a limiter does beyond its family's plain model:
// the penalties and bucket quirks of limiter.Config, as infer names them.
type Behaviour string

// The behaviours.
const (
	BehaviourBlock      Behaviour = "block"
	BehaviourExtend     Behaviour = "extend"
	BehaviourRestart    Behaviour = "restart"
	BehaviourIdle       Behaviour = "idle-eviction"
	BehaviourWholeToken Behaviour = "whole-token-refill"
	BehaviourTimer      Behaviour = "timer"
)

// BehavioursOf lists the behaviours of a limiter configuration (what a
// leave-one-out test removes from the candidates).
func BehavioursOf(c limiter.Config) []Behaviour {
	var out []Behaviour
	switch c.Penalty.Kind {
	case limiter.PenaltyBlock:
		out = append(out, BehaviourBlock)
	case limiter.PenaltyExtend:
		out = append(out, BehaviourExtend)
	case limiter.PenaltyRestart:
		out = append(out, BehaviourRestart)
	}
	if c.ForgetIdle > 0 {
		out = append(out, BehaviourIdle)
	}
	switch c.Refill {
	case limiter.RefillWhole:
		out = append(out, BehaviourWholeToken)
	case limiter.RefillInterval:
		out = append(out, BehaviourTimer)
	}
	if c.Align == limiter.AlignTimer {
		out = append(out, BehaviourTimer)
	}
	return out
}

func (o *Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o *Options) lead() time.Duration {
	if o.Lead > 0 {
		return o.Lead
	}
	return DefaultLead
}

func (o *Options) maxRequests() int {
	if o.MaxRequests > 0 {
		return o.MaxRequests
	}
	return DefaultMaxRequests
}

func (o *Options) maxDuration() time.Duration {
	if o.MaxDuration > 0 {
		return o.MaxDuration
	}
	return DefaultMaxDuration
}

func (o *Options) maxWindow() time.Duration {
	if o.MaxWindow > 0 {
		return o.MaxWindow
	}
	return DefaultMaxWindow
}

// Param is an estimated parameter: the value reported and the interval of
// values that reproduce the observations equally well. Integers are carried
// as float64 with integral values.
type Param struct {
	Value float64 `json:"value"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
}

// Params are the estimated parameters; a nil member does not apply to the
// family (or could not be estimated).
type Params struct {
	Limit     *Param `json:"limit"`      // requests per window (window families)
	WindowS   *Param `json:"window_s"`   // window length in seconds (window families)
	RatePerS  *Param `json:"rate_per_s"` // refill or drain rate (buckets)
	Capacity  *Param `json:"capacity"`   // requests admitted at once from idle (buckets)
	Undelayed *Param `json:"undelayed"`  // leaky-bucket-queue: served at once from idle (nginx delay + 1)
	Queue     *Param `json:"queue"`      // leaky-bucket-queue: further requests held rather than rejected
	IdleS     *Param `json:"idle_s"`     // idle-eviction: seconds without a request after which a key starts afresh
	// PhaseS places timer-aligned windows (alignment timer): they start at
	// PhaseS + k·WindowS seconds since the Unix epoch, 0 ≤ PhaseS < WindowS.
	PhaseS *Param `json:"phase_s"`
}

// PenaltyFit is an inferred penalty: its kind and, for block, the block's
// length in seconds (nil for extend and restart, which have none).
type PenaltyFit struct {
	Kind      limiter.PenaltyKind `json:"kind"`
	DurationS *Param              `json:"duration_s"`
}

// RetryAfter says whether rejections carry Retry-After, and whether it is
// honest: a retry at the advertised moment would be admitted, and not
// admitted much earlier (within max(2 s, half the advertised delay)).
// Honest is nil when Retry-After is not sent or cannot be judged, and
// when the answer is not exact (judgedOnExact).
type RetryAfter struct {
	Sent   bool  `json:"sent"`
	Honest *bool `json:"honest"`
	// Grade is the worst grade of the judged Retry-After values (see
	// verify.GradeRetryAfter): exact, rounded-up, late or early; malformed
	// when a rejection's value breaks RFC 9110's grammar (Raw holds it);
	// nil when none was judged. Honest means exact or rounded-up.
	Grade *string `json:"grade"`
	// Raw is the first Retry-After value that breaks the grammar, verbatim;
	// empty (omitted) when every value parsed.
	Raw string `json:"raw,omitempty"`
	// TrueWaitS is the measured true wait, in seconds, of the rejection
	// that got the worst grade; nil when none was judged.
	TrueWaitS *float64 `json:"true_wait_s"`
}

// OverAdmission is the evidence of a limiter that admits more under
// concurrency than its limit (lost updates of a non-atomic counter): the
// most accepted from idle by paced (one at a time) and by concurrent
// requests, and what shows it.
type OverAdmission struct {
	SequentialMax int    `json:"sequential_max"`
	ConcurrentMax int    `json:"concurrent_max"`
	Evidence      string `json:"evidence"`
}

// Instances is how many limiter instances the outcomes show behind the
// target's address, each enforcing the document's params on its own, and
// how requests are spread over them. It comes from behaviour alone: what
// paced requests on one kept-alive connection and on a new connection each
// admitted (by connection), or the remaining quota their answers advertise
// counting down in interleaved sequences (by request); never a header that
// names an instance.
type Instances struct {
	// Value is the count reported; Low and High bound the counts the
	// outcomes allow (equal when they fix it).
	Value int `json:"value"`
	Low   int `json:"low"`
	High  int `json:"high"`
	// By is how the balancer spreads requests: BalanceConnection (each
	// connection kept on one instance) or BalanceRequest.
	By string `json:"by"`
}

// The balancing modes of Instances.By (contract names).
const (
	BalanceConnection = "connection"
	BalanceRequest    = "request"
)

// Alternative is a family that did not win, with the share of outcomes its
// best model reproduces and the observation that ruled it out.
type Alternative struct {
	Algorithm  Family  `json:"algorithm"`
	Reproduced float64 `json:"reproduced"`
	RuledOutBy string  `json:"ruled_out_by"`
}

// Inference is the infer document of the contract. A nil pointer member is
// JSON null: not applicable or not determined.
type Inference struct {
	Schema string `json:"schema"`
	Tool   string `json:"tool"`
	// Algorithm is the family named, empty (JSON null) when no family fits
	// (Fit misfit).
	Algorithm Family `json:"algorithm"`
	// Fit says how far the answer is to be trusted: exact, approximate or
	// misfit (see Fit).
	Fit Fit `json:"fit"`
	// Closest is the family whose best model comes closest: Algorithm when
	// one is named, the nearest family for a misfit, empty (null) for a
	// misfit where refusals were seen and every model was ruled out.
	Closest Family `json:"closest"`
	// Misses lists the observed outcomes the answer (for a misfit, the
	// closest family's best model) does not reproduce, worst first, at
	// most maxMissesListed; empty when it reproduces them all.
	Misses []Miss `json:"misses"`
	// Validation says which experiment validated the answer and how
	// (empty when none did).
	Validation string `json:"validation,omitempty"`
	Params     Params `json:"params"`
	// Alignment is where fixed windows start (fixed-window and
	// sliding-window-counter): epoch, first-request or unknown.
	Alignment *string `json:"alignment"`
	// CountsRejected reports whether rejected requests count against the
	// quota (a client sending above the limit is locked out); nil where it
	// makes no observable difference (fixed-window) or was not determined.
	CountsRejected *bool `json:"counts_rejected"`
	// Penalty is what a refusal does to the key beyond counting (block,
	// extend, restart; see limiter.PenaltyKind), nil when the answer has
	// none. Params keep the limit and window without the penalty folded in.
	Penalty *PenaltyFit `json:"penalty"`
	// Quirks lists how the bucket departs from the plain token bucket:
	// idle-eviction (Params.IdleS), whole-token-refill. Empty when none.
	Quirks []Behaviour `json:"quirks"`
	// Key is global, the identity the clients varied (ip, header:NAME), or
	// unknown when it was not tested.
	Key string `json:"key"`
	// RejectStatus is the status of rejections; nil when none was seen.
	RejectStatus *int `json:"reject_status"`
	// Headers lists the rate-limit header dialects seen (contract names).
	Headers []string `json:"headers"`
	// Advertised lists where the headers' claims disagree with the
	// fitted answer (headers are claims, behaviour is evidence): empty
	// when every claim agrees, nil (JSON null) when no rate-limit header
	// was seen or no model was fitted, and when the answer is not exact
	// (judgedOnExact).
	Advertised []Advertised `json:"advertised"`
	RetryAfter RetryAfter   `json:"retry_after"`
	// OverAdmission is set when a concurrent burst admitted more than the
	// limit fitted from paced experiments; nil otherwise.
	OverAdmission *OverAdmission `json:"over_admission"`
	// Instances is set when the outcomes show several limiter instances
	// behind the one address, each enforcing Params on its own; nil when
	// one instance explains them (a shared store included). It and
	// OverAdmission are never both set.
	Instances *Instances `json:"instances"`
	// NeverRejects reports a target that rejected nothing but held
	// requests (a queue that only delays): params.queue is then null, and
	// Note says how many were held at once.
	NeverRejects bool `json:"never_rejects"`
	// MaxRatePerS is, for none, the highest rate of accepted requests
	// reached: the most accepted in any one-second interval.
	MaxRatePerS *float64 `json:"max_rate_per_s"`
	// Reproduced is the share of observed outcomes the answer (for a
	// misfit, the closest family's best model) reproduces, 0 to 1.
	Reproduced   float64       `json:"reproduced"`
	Alternatives []Alternative `json:"alternatives"`
	// Requests is the number of requests the inference rests on (those of
	// Options.Prior included); DurationS how long infer ran.
	Requests  int     `json:"requests"`
	DurationS float64 `json:"duration_s"`
	// Complete is false when the budget (time or requests) or an error
	// ended the experiments before the candidates were told apart.
	Complete   bool   `json:"complete"`
	RecordFile string `json:"record_file"`
	// Note says, for people, what the fields alone do not: how many
	// requests a queue that never rejects was seen to hold, why a run
	// without rejections is not called none.
	Note string `json:"note,omitempty"`
}
