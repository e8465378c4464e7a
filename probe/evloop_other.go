//go:build !linux

package probe

// startLoop reports false: the event loop is Linux's; elsewhere the
// dispatcher sends on the net.Conn path.
func (r *run) startLoop() bool { return false }
