package testenv

import (
	"flag"
	"strconv"
)

// WaitingParallel sets the test binary's -test.parallel to n unless the
// command line set it: for a package whose parallel tests spend their
// time waiting out windows in real time, each in a process of its own
// (the built binary against a server on loopback), where GOMAXPROCS — the
// default, 2 on a two-core machine — leaves the cores idle. Call it from
// TestMain before m.Run. The tests' margins hold beside two busy-loop
// burners (a 2× load), which n of them in flight on two cores stays under.
func WaitingParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			set = true
		}
	})
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
