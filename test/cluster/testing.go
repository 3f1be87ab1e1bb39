package cluster

import (
	"context"
	"os"
	"testing"
	"time"
)

// StartForTest starts a cluster for a test or benchmark and stops it in
// tb.Cleanup, printing the tail of every component log when the test failed.
// Progress lines go to the test log.
func StartForTest(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	if opts.Log == nil {
		opts.Log = testWriter{tb}
	}
	// The first use of a version builds it, which takes minutes on 2 cores.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		tb.Fatalf("starting the local cluster: %v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() || os.Getenv("KUBE_RECLAIM_CLUSTER_LOGS") != "" {
			tb.Logf("component logs:%s", c.LogTails())
		}
		c.Stop()
	})
	return c
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(string(p))
	return len(p), nil
}
