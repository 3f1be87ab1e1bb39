package e2e

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

var names = framework.Names

const gib = int64(1) << 30

// views reads the named nodes as the suite's readers judge them.
func views(ctx context.Context, c *cluster.Cluster, only []string) (map[string]framework.NodeView, error) {
	return framework.Views(ctx, c, only, staleAfter)
}

// checkStatusWrites fails the test for every nodes/status write in [from, to]
// that the apiserver answered with an error, and returns how many writes each
// writer (user agent up to the first '/') made.
func checkStatusWrites(t *testing.T, c *cluster.Cluster, from, to time.Time) map[string]int {
	t.Helper()
	// Wait for the log to be written past to: a late batch would hide failed
	// writes.
	framework.WaitAuditPast(t, c, to, time.Minute)
	byWriter := map[string]int{}
	failed := 0
	for _, e := range framework.NodeWrites(t, c, from, to) {
		if e.ObjectRef.Subresource != "status" {
			continue
		}
		agent, _, _ := strings.Cut(e.UserAgent, "/")
		byWriter[agent]++
		if e.ResponseStatus.Code >= 400 {
			failed++
			if failed <= 5 {
				t.Errorf("nodes/%s status %s by %s failed: %d %s", e.ObjectRef.Name, e.Verb, e.UserAgent, e.ResponseStatus.Code, e.ResponseStatus.Message)
			}
		}
	}
	if failed > 5 {
		t.Errorf("... %d failed node status writes in all", failed)
	}
	return byWriter
}

// marginOf is ceil(alloc x margin), as the policy computes it (in parts per
// million, rounding up).
func marginOf(alloc int64, margin float64) int64 {
	ppm := int64(math.Round(margin * 1e6))
	return (alloc*ppm + 999_999) / 1_000_000
}

func mib(b int64) string { return fmt.Sprintf("%.1fMi", float64(b)/(1<<20)) }
