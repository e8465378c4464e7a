package probe

import (
	"sync"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

// race prepares batch rc and releases it at its deadline. Members whose
// preparation failed carry their error; members not released (the run
// stopped first) are left for the sweep, which records them as not-sent.
func (r *run) race(rc *race) {
	defer r.wg.Done()
	release := r.begin.Add(rc.at)
	gate := make(chan struct{}) // closed: release
	off := make(chan struct{})  // closed: called off
	var prepared sync.WaitGroup
	prepared.Add(len(rc.members))
	var held heldBatch
	switch r.e.opt.RaceMode {
	case RaceSinglePacket:
		r.prepareSinglePacket(rc, release, &prepared, gate, off)
	default:
		lastByte := r.e.opt.RaceMode == RaceLastByte
		if !lastByte || r.e.lbGoroutines {
			held.off = true // the members release themselves at the gate
		}
		for _, i := range rc.members {
			r.wg.Add(1)
			go r.member(i, release, lastByte, &held, &prepared, gate, off)
		}
	}
	prepared.Wait()

	p := r.e.pacer
	p.start()
	defer p.stop()
	p.wait(r.dctx, release)
	if r.dctx.Err() == nil && r.guard(p, len(rc.members)) {
		r.releaseHeld(&held)
		close(gate)
		return
	}
	for _, m := range held.members {
		m.h.close() // it holds an incomplete request
	}
	close(off)
}

// heldBatch collects the members of a last-byte race that are ready for a
// release by one loop: each holds a connection with all of its request
// written but the final byte.
type heldBatch struct {
	off     bool // members release themselves (barrier, or lbGoroutines)
	mu      sync.Mutex
	members []heldMember
}

type heldMember struct {
	i   int
	p   *pool
	h   *h1Conn
	res record.Result
}

// releaseHeld writes the final byte of every held member in one tight loop
// (the spread is then about N write system calls, in a fixed order, with no
// goroutine to wake), stamping each Wrote just before its write, and then
// hands the connections to their readers, already waiting for the
// responses.
func (r *run) releaseHeld(b *heldBatch) {
	ms := b.members // prepared.Wait ordered every append before this
	errs := make([]error, len(ms))
	for k := range ms {
		m := &ms[k]
		req := m.p.h1req
		at := time.Now()
		if _, errs[k] = m.h.sc.Write(req[len(req)-1:]); errs[k] == nil {
			m.res.Wrote = r.stamp(at)
		}
	}
	for k, m := range ms {
		err := errs[k]
		if err == nil {
			err = m.h.sc.SetDeadline(time.Now().Add(r.e.opt.Timeout))
		}
		r.handOff(m.i, m.p, m.h, m.res, err, false)
	}
}

// member prepares send i of a barrier or last-byte race on a connection of
// its own (last-byte: an HTTP/1.1 connection holding all of the request but
// its final byte), then either joins held (released by one loop) or waits
// for the gate and completes the request.
func (r *run) member(i int, release time.Time, lastByte bool, held *heldBatch, prepared *sync.WaitGroup, gate, off <-chan struct{}) {
	defer r.wg.Done()
	p := r.bk.pool(i)
	res := r.newResult(i)
	mode := dialAny
	if lastByte {
		mode = dialH1
	}
	c, err := r.memberConn(i, p, mode)
	if err != nil {
		prepared.Done()
		if r.dialFailed(err) || r.dctx.Err() == nil { // else the run stopped: not-sent
			r.finish(i, res, err)
		}
		return
	}
	if c.h2 != nil { // barrier over a multiplexed HTTP/2 connection
		prepared.Done()
		select {
		case <-gate:
			r.roundTripH2(i, p, c.h2, res)
		case <-off:
		}
		return
	}
	h := c.h1
	req := p.h1req
	if lastByte {
		if err := h.sc.SetDeadline(release.Add(r.e.opt.Timeout)); err != nil {
			prepared.Done()
			h.close()
			r.finish(i, res, err)
			return
		}
		h.sc.resetFirst()
		res.Src = h.src
		res.Sent = r.stamp(time.Now())
		if _, err := h.sc.Write(req[:len(req)-1]); err != nil {
			prepared.Done()
			h.close()
			r.finish(i, res, err)
			return
		}
		if !held.off {
			// The reader waits for the response from now on, so that the
			// release wakes no goroutine before its last write.
			p.startReader(h)
			held.mu.Lock()
			held.members = append(held.members, heldMember{i: i, p: p, h: h, res: res})
			held.mu.Unlock()
			prepared.Done()
			return
		}
	}
	prepared.Done()
	select {
	case <-gate:
	case <-off:
		if lastByte {
			h.close() // it holds an incomplete request
		} else {
			p.putH1(h)
		}
		return
	}
	if !lastByte {
		err := r.writeH1(h, req, &res)
		r.handOff(i, p, h, res, err, false)
		return
	}
	at := time.Now()
	_, err = h.sc.Write(req[len(req)-1:])
	if err == nil {
		res.Wrote = r.stamp(at)
		err = h.sc.SetDeadline(at.Add(r.e.opt.Timeout))
	}
	r.handOff(i, p, h, res, err, false)
}
