// Command pprofwrap is kube-reclaim with net/http/pprof served on the
// address in $KUBE_RECLAIM_BENCH_PPROF, for `bench scheduler -profile-dir`
// only: the product serves no profiler (its verbs carry no authentication),
// and the bench must profile the extender it times.
package main

import (
	"fmt"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof on http.DefaultServeMux
	"os"
	"time"

	"github.com/kube-reclaim/kube-reclaim/cmd/kube-reclaim/app"
)

// Env names the loopback address of the profiler.
const Env = "KUBE_RECLAIM_BENCH_PPROF"

func main() {
	if addr := os.Getenv(Env); addr != "" {
		srv := &http.Server{Addr: addr, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil {
				fmt.Fprintf(os.Stderr, "pprof on %s: %v\n", addr, err)
			}
		}()
	}
	os.Exit(app.Main())
}
