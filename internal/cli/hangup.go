package cli

import (
	"os"
	"os/signal"
	"syscall"
)

// hangups returns the channel that asks serve to reload its config: the
// factory's seam when set, else SIGHUP. stop releases the signal.
func (f *Factory) hangups() (<-chan struct{}, func()) {
	if f.Hangups != nil {
		return f.Hangups, func() {}
	}
	sig := make(chan os.Signal, 1)
	out := make(chan struct{}, 1)
	done := make(chan struct{})
	signal.Notify(sig, syscall.SIGHUP)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-sig:
				select {
				case out <- struct{}{}:
				default: // a reload is already pending
				}
			}
		}
	}()
	return out, func() { signal.Stop(sig); close(done) }
}
