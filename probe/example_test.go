package probe_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/rlprobe/rlprobe/probe"
)

// Two clients, told apart by a header, against a server that rejects the
// second one.
func ExampleEngine_Run() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Client") == "k2" {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()

	e, err := probe.New(probe.Options{URLs: []string{srv.URL}, ClientHeader: "X-Client"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()
	sends := []probe.Send{
		{At: 0, Client: 0},
		{At: 10 * time.Millisecond, Client: 1},
		{At: 20 * time.Millisecond, Client: 0},
	}
	zero := time.Now() // the record file's Header.Start
	results, err := e.Run(context.Background(), zero, zero.Add(10*time.Millisecond), sends, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range results {
		fmt.Println(r.Seq, r.Client, r.Outcome, r.Status)
	}
	s := probe.Summarize(results)
	fmt.Printf("accepted %d, rejected %d\n", s.Accepted, s.Rejected)
	// Output:
	// 0 k1 response 200
	// 1 k2 response 429
	// 2 k1 response 200
	// accepted 2, rejected 1
}
