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
}

// Schedule is an ordered list of sends. Sends are sorted by At (stable), and
// Duration is at least the last At.
type Schedule struct {
	Sends []Send `json:"sends"`
	// Clients is the number of client identities used (max Client + 1).
	Clients int `json:"clients"`
	// RaceMode is how batches are released; empty means Barrier.
	RaceMode RaceMode `json:"race_mode,omitempty"`
	// Duration is the planned length of the schedule.
	Duration time.Duration `json:"duration"`
}
