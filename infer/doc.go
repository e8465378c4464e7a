// Package infer identifies, from outside, which rate-limiting algorithm an
// HTTP endpoint runs and with which parameters.
//
// [Infer] runs experiments through an [Engine] (the probe engine, or any
// model of a server) and fits every candidate model to what it observed;
// [InferRecords] fits results already recorded. Both return the infer
// document of the contract, an [Inference].
//
// # Families
//
// The candidates are the [Family] values: fixed-window (aligned to the Unix
// epoch or started by a key's first request), sliding-log, sliding-window-
// counter (each counting rejected requests or not), token-bucket (GCRA and
// nginx limit_req nodelay decide identically, so they are reported as one),
// leaky-bucket-queue (nginx limit_req without nodelay: accepted requests are
// held, one per 1/rate) and none.
//
// # Fitting
//
// Every model is a [limiter.Config] replayed, request by request, through
// [limiter.Config.Step] at the estimated server arrival of each observed
// request (the server's echo when present, else the last byte written plus
// half the fastest round trip). A model's score is the number of observed
// outcomes it fails to reproduce: per cluster of requests too close together
// to order, the number accepted, and for queueing limiters the sorted delays
// (an answer can come back later than its queue delay, never earlier: a
// delay shorter than the model's is a miss, a longer one only when most of
// the cluster's are, else it is a stall). Requests are too close to order
// when they arrived within 2 ms of each other, or when one arrived before an
// earlier one may have been decided: an answer that came back later than the
// fastest (from arrival to answer) may have been decided that much later,
// after requests that arrived in between (a server under load stamps a
// request when it reads it and consults its limiter when the handler runs).
// Such a group is replayed one identity after the other, in the order they
// first arrived in it. A lone request within a small timing tolerance of a
// model's boundary (a thousandth of the model's time scale, or its own
// arrival uncertainty) is given the benefit of the doubt, so parameters are
// never pinned more finely than the measurements support. A model's state
// after a cluster of unknown order is known only to within the cluster's
// span (a window starts at the request decided first), so until the model
// forgets it (its time scale), a cluster whose count the model misses may
// move by that span too.
//
// Parameters are searched on grids: counts around the first count observed,
// the window or rate on a geometric grid refined near the best points, and,
// for epoch-aligned windows, whole multiples of a round unit (the edges of
// such a window depend on its length to the nanosecond, so only round
// lengths are meaningful). The reported value of a parameter is the middle
// of the range over which the winning model reproduces the observations
// equally well; that range is reported as low and high. The confidence is
// the share of outcomes the winner reproduces.
//
// # Experiments
//
// Infer opens with bursts from idle growing until one is refused (the first
// count; a latency staircase reveals a queue), a recovery scan with single
// probes at offsets growing by √2, a second exhausting burst (with two
// requests of a second identity when the engine has several, to tell a
// global key from a per-client one) and a second scan. The key is the
// keying whose best model misses fewer outcomes or, when the bests tie,
// the keying under which no variant does worse and some variant does
// better; until that holds, every refit asks again. From then on it
// weighs the models that still fit — each family, variant and count alike,
// times a likelihood of 1/20 per outcome missed beyond the best — and runs
// the candidate experiment (probes where the models disagree on recovery,
// bursts at several phases, spread-then-burst, sustained load, an edge
// straddle) whose outcome carries the most information about the answer per
// second spent, until one answer holds 99 % of the weight with its
// continuous parameter known within 10 %, no experiment can tell the rest
// apart, or the budget ends: 6·W + 30 s (W the time scale), Options.
// MaxDuration and Options.MaxRequests.
//
// A rejection that advertises when quota returns (Retry-After, or the
// reset of a rate-limit header) does not leave that moment in a gap of the
// √2 scan: the scan probes a comb over the second before it, and goes on
// geometrically if nothing there was admitted (an advertisement is checked,
// never trusted). A window advertised on every answer (a draft-8 policy,
// say) whose rejections all return on its epoch multiples settles the
// design as soon as the observations fit it as well as anything else, and
// breaks the tie between an epoch-aligned window and one started by a
// request that the data alone would need more windows to break.
//
// # Queues that never reject, and counters that are not atomic
//
// A target that held a burst in a latency staircase without rejecting
// anything is probed with bursts no longer than half the engine's timeout
// (Options.Timeout) takes to drain, then with a steady stream at twice the
// drain rate: a queue answers it at its drain rate with growing latency,
// and is reported as a leaky-bucket-queue with never_rejects and a null
// queue; a server that merely slowed under a burst serves it as offered
// with flat latency, and is none. None is said only when the load was
// served at 95 % of the offered rate or more with flat latency (the last
// third's p90 at most twice the first third's plus 20 ms); max_rate_per_s
// counts accepted answers.
//
// A burst whose answers show lost updates (a remaining value repeated by
// three or more accepted answers, or more accepted than the advertised
// limit) switches the session to paced bursts, each request sent after the
// previous one was decided, from a recovered state on; the fit rests on
// those alone, and one concurrent burst from idle at the end measures the
// over-admission (over_admission).
//
// # Instances behind one address
//
// Several limiter instances, each with its own state, behind a balancer
// that keeps each connection on one instance admit K times one instance's
// quota to a concurrent burst (its requests open many connections). After
// the opening, paced requests from a recovered state on one new kept-alive
// connection (Send.Conn) tell: when they admit what the burst did, nothing
// more is sent; otherwise the same again, each on a new connection, admits
// K quotas under K instances and one quota under a racy shared counter. K
// instances restart the session on that one connection, paced, so that
// params are one instance's policy, and are reported as instances (the
// count's range from the fitted quota; a run that a clock-aligned window's
// edge crossed runs once more just after an edge), never beside
// over_admission; without a family that fits the one connection, no
// instances are concluded. Balancing per request is not told from one
// limiter of K quotas. No header that names an instance is read.
//
// Nothing in this package reads the clock except through Options.Now, and
// nothing sends except through the Engine; it never imports the probe
// engine.
package infer
