package probe

import (
	"sync"
	"time"
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
	switch r.e.opt.RaceMode {
	case RaceSinglePacket:
		r.prepareSinglePacket(rc, release, &prepared, gate, off)
	default:
		lastByte := r.e.opt.RaceMode == RaceLastByte
		for _, i := range rc.members {
			r.wg.Add(1)
			go r.member(i, release, lastByte, &prepared, gate, off)
		}
	}
	prepared.Wait()

	p := r.e.pacer
	p.start()
	defer p.stop()
	p.wait(r.dctx, release)
	if r.dctx.Err() == nil && r.guard(p, len(rc.members)) {
		close(gate)
		return
	}
	close(off)
}

// member prepares send i of a barrier or last-byte race on a connection of
// its own (last-byte: an HTTP/1.1 connection holding all of the request but
// its final byte), waits for the release and completes the request.
func (r *run) member(i int, release time.Time, lastByte bool, prepared *sync.WaitGroup, gate, off <-chan struct{}) {
	defer r.wg.Done()
	p := r.items[i].pool
	res := r.newResult(i)
	mode := dialAny
	if lastByte {
		mode = dialH1
	}
	c, err := r.getConn(r.dctx, p, mode)
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
