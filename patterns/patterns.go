// Package patterns computes traffic schedules: pure descriptions of "request
// i goes out at offset t, as client c". It never sleeps and never sends; the
// probe engine turns offsets into absolute deadlines. Randomised shapes take
// an explicit seed, which goes into the record header.
package patterns

import "time"

// RaceMode says how the requests of one batch are released together.
type RaceMode string

// Race modes (contract names).
const (
	// Barrier: every request is fully prepared (connection dialled), then
	// all goroutines are released at once and write their whole request.
	Barrier RaceMode = "barrier"
	// LastByte: every request is written except its final byte on its own
	// connection, then all final bytes are released (HTTP/1.1).
	LastByte RaceMode = "last-byte"
	// SinglePacket: HTTP/2 streams on one connection with each stream's
	// final frame withheld, then all flushed in one write.
	SinglePacket RaceMode = "single-packet"
)

// Send is one scheduled request.
type Send struct {
	// At is the offset from the start of the schedule at which the request
	// is due to go out.
	At time.Duration `json:"at"`
	// Client is the client identity index, from 0. The engine maps it to a
	// key value (k1…kN, or --client-values) and/or a source address.
	Client int `json:"client"`
	// Phase names the probe or plan phase the request belongs to.
	Phase string `json:"phase,omitempty"`
	// Batch, when non-zero, marks the request as part of a synchronised
	// release: every Send with the same Batch is prepared in advance and
	// released together at At, in the schedule's RaceMode.
	Batch int `json:"batch,omitempty"`
	// Conn chooses the client's connection: 0 means any (the engine picks
	// one, as it always has); n ≥ 1 means the client's n-th connection,
	// opened on its first use, kept alive, and reopened only when the
	// server closed it. Requests on one Conn are sent one after another,
	// never pipelined; the record's src shows which connection carried
	// each. A deployment behind a per-connection balancer sees each Conn
	// as one stable route.
	Conn int `json:"conn,omitempty"`
}

// Schedule is an ordered list of sends. Sends are sorted by At (stable), and
// Duration is at least the last At. A streamed schedule (Streamed, made by
// Plan.Streamed) holds no Sends: All produces them on demand and Len
// counts them; code that reads Sends directly must be given a schedule
// that is not streamed. The zero value is an empty schedule.
// A Schedule is a value: the constructors and methods of this package never
// modify a schedule they are given, so one may be shared by goroutines that
// only read it.
type Schedule struct {
	Sends []Send `json:"sends"`
	// Clients is the number of client identities used (max Client + 1).
	Clients int `json:"clients"`
	// RaceMode is how batches are released; empty means Barrier.
	RaceMode RaceMode `json:"race_mode,omitempty"`
	// Duration is the planned length of the schedule.
	Duration time.Duration `json:"duration"`
	// Start, when non-zero, anchors the schedule to the wall clock: offset 0
	// is due at exactly Start (an edge aligned to a window of the clock, or
	// --start-at). When zero the runner starts whenever it is ready.
	Start time.Time `json:"start,omitzero"`
	// Phases describes the schedule's phases in order, pauses included.
	Phases []PhaseInfo `json:"phases,omitempty"`

	// stream, when non-nil, makes a streamed schedule: Sends is nil and
	// All computes the sends from these phases' closed forms.
	stream []segment
}

// PhaseInfo describes one phase of a schedule.
type PhaseInfo struct {
	// Name is the phase name carried by its sends (Send.Phase).
	Name string `json:"name"`
	// Pattern is the pattern that made it: steady, burst, edge, recovery,
	// race, ramp or pause.
	Pattern string `json:"pattern"`
	// Offset is when the phase begins, from the start of the schedule.
	Offset time.Duration `json:"offset"`
	// Duration is the phase's planned length.
	Duration time.Duration `json:"duration"`
	// Requests is the number of sends in the phase.
	Requests int `json:"requests"`
}
