package probe

import (
	"fmt"
	"sync/atomic"
)

// A run's per-send state lives in a book of fixed-size chunks, indexed by
// the send's index in the run: a chunk is made when the first of its sends
// enters the run and dropped once the last of them is finished. A run of
// a slice (Run) makes all its chunks before it starts; a streamed run
// (Stream) makes each as the source reaches it, so only the chunks of the
// sends in flight are ever held, whatever the length of the schedule.

const (
	// chunkBits sizes the chunks: 256 sends, about 15 KB. A chunk lives
	// as long as its slowest send, so a small one pins little memory for
	// a straggler (a send that waits out its timeout).
	chunkBits = 8
	// chunkSize is the number of sends a chunk holds.
	chunkSize = 1 << chunkBits
	chunkMask = chunkSize - 1
	// streamDirBits sizes a streamed run's directory of chunks: 2^18
	// chunks (2 MB of pointers), so the sends from the oldest one in
	// flight to the newest may span 64 M (the run aborts beyond; see
	// book.add).
	streamDirBits = 18
)

// sendChunk is the state of chunkSize consecutive sends of a run.
type sendChunk struct {
	no      int                               // the chunk's number: its first send's index / chunkSize
	sends   [chunkSize]Send                   // written before the send is dispatched
	pools   [chunkSize]*pool                  // likewise
	reading [chunkSize]atomic.Pointer[h1Conn] // the connection being read, for settle to abandon
	// finished and left are guarded by the run's mu.
	finished [chunkSize]bool
	left     int // sends of the chunk not finished yet
}

// book maps a run's send indexes to their chunks. Lookups (send, pool,
// reading) are lock-free and safe for concurrent use with add and drop:
// a send's chunk is published before the send is dispatched and dropped
// only after it is finished. Only one goroutine adds.
type book struct {
	dir  []atomic.Pointer[sendChunk]
	mask int
	n    int // sends added (by the adding goroutine only)
}

// newBook returns a book whose directory holds 2^bits chunks.
func newBook(bits int) *book {
	return &book{dir: make([]atomic.Pointer[sendChunk], 1<<bits), mask: 1<<bits - 1}
}

// bookFor returns a book for n sends: all of their chunks fit in it at once.
func bookFor(n int) *book {
	bits := 0
	for 1<<bits<<chunkBits < n {
		bits++
	}
	return newBook(bits)
}

// chunk returns the chunk of send i, which must have been added and not
// dropped.
func (b *book) chunk(i int) *sendChunk {
	return b.dir[(i>>chunkBits)&b.mask].Load()
}

// send returns send i.
func (b *book) send(i int) Send { return b.chunk(i).sends[i&chunkMask] }

// pool returns the pool of send i.
func (b *book) pool(i int) *pool { return b.chunk(i).pools[i&chunkMask] }

// reading returns the slot of the connection being read for send i.
func (b *book) reading(i int) *atomic.Pointer[h1Conn] {
	return &b.chunk(i).reading[i&chunkMask]
}

// add appends a send of pool p and returns its index. It fails when the
// chunk it needs is still held by sends 2^streamDirBits chunks older that
// are in flight.
func (b *book) add(s Send, p *pool) (int, error) {
	i := b.n
	slot := &b.dir[(i>>chunkBits)&b.mask]
	c := slot.Load()
	if i&chunkMask == 0 {
		if c != nil {
			return 0, fmt.Errorf("more than %d sends in flight", (b.mask+1)*chunkSize)
		}
		c = &sendChunk{no: i >> chunkBits, left: chunkSize}
		slot.Store(c)
	}
	c.sends[i&chunkMask] = s
	c.pools[i&chunkMask] = p
	b.n++
	return i, nil
}

// seal ends the adding: the unused places of the last chunk count as
// finished, and the chunk is dropped when that leaves none unfinished.
// The caller holds the run's mu.
func (b *book) seal() {
	if b.n&chunkMask == 0 {
		return
	}
	c := b.chunk(b.n - 1)
	c.left -= chunkSize - b.n&chunkMask
	if c.left == 0 {
		b.dir[c.no&b.mask].Store(nil)
	}
}

// finish marks send i finished and reports whether it was not already;
// the chunk is dropped with its last send. The caller holds the run's mu.
func (b *book) finish(i int) bool {
	c := b.chunk(i)
	if c == nil || c.finished[i&chunkMask] {
		return false
	}
	c.finished[i&chunkMask] = true
	c.left--
	if c.left == 0 { // (seal counted the places never added)
		b.dir[c.no&b.mask].Store(nil)
	}
	return true
}

// finished reports whether send i, which was added, is finished.
func (b *book) finished(i int) bool {
	c := b.chunk(i)
	return c == nil || c.no != i>>chunkBits || c.finished[i&chunkMask]
}

// live calls f for each chunk still held, oldest first.
func (b *book) live(f func(c *sendChunk)) {
	if b.n == 0 {
		return
	}
	last := (b.n - 1) >> chunkBits
	for no := max(0, last-b.mask); no <= last; no++ {
		if c := b.dir[no&b.mask].Load(); c != nil && c.no == no {
			f(c)
		}
	}
}
