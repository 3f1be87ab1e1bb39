// Command bench measures kube-reclaim against the performance goals of
// docs/design.md#performance-goals, each side by side with its baseline in the same run:
//
//	go run ./hack/bench webhook    P1: the real HTTPS webhook vs a server that only reads the body
//	go run ./hack/bench scheduler  P2: on kwok nodes, reclaimed pods vs the same pods asking native
//	                               resources, in each topology: real kube-scheduler with the
//	                               extender, and kube-reclaim-scheduler with the placement plugin
//	go run ./hack/bench rss        P4: RSS of the publisher and extender processes against a fake API
//	                               server holding 5000 nodes and 150,000 pods
//	go run ./hack/bench scale      P4: publisher and extender as real processes on the real local
//	                               control plane with 1000 kwok nodes and 20,000 running pods
//	go run ./hack/bench all        the Go benchmarks (P1, P3, P4), the commands above, one table,
//	                               and the same as JSON (`make bench`)
//
// Everything runs on this machine: the webhook load on 127.0.0.1, the
// scheduler benchmark on the local control plane of test/cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"
)

const usage = `usage: go run ./hack/bench <command> [flags]

commands:
  webhook    P1: webhook HTTPS load at increasing rates, side by side with the baseline server
  scheduler  P2: scheduling throughput of reclaimed pods vs native ones, through the extender (real
             kube-scheduler) and through the plugin (kube-reclaim-scheduler), each judged on the
             median of consecutive runs (-scheduler-runs, -topologies)
  rss        P4: publisher and extender RSS as real processes, against a fake API server holding 5000 nodes / 150,000 pods
  scale      P4: publisher and extender RSS and CPU as real processes on the real local control plane, 1000 kwok nodes / 20,000 pods
  replay     R: the shared real trace (../shared/traces) through the policy, beside the baselines (issue 30)
  all        every benchmark, one table (stdout) and JSON (-o, default bench-results.json)

Run a command with -h for its flags.
`

func main() {
	os.Exit(run())
}

// run runs the command of os.Args and returns the exit code, so that its
// deferred calls run before main exits.
func run() int {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	// The servers and clients under test log at info; the tables are the output.
	logrus.SetLevel(logrus.WarnLevel)
	cmd, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	var err error
	switch cmd {
	case "webhook":
		var cfg webhookConfig
		cfg.flags(fs)
		_ = fs.Parse(args)
		_, err = runWebhook(ctx, cfg, os.Stdout)
	case "scheduler":
		var cfg schedulerConfig
		cfg.flags(fs)
		_ = fs.Parse(args)
		_, err = runSchedulerRuns(ctx, cfg, os.Stdout)
	case "rss":
		var cfg rssConfig
		cfg.flags(fs)
		_ = fs.Parse(args)
		_, err = runRSS(ctx, cfg, os.Stdout)
	case "scale":
		var cfg scaleConfig
		cfg.flags(fs)
		_ = fs.Parse(args)
		_, err = runScale(ctx, cfg, os.Stdout)
	case "replay":
		var rc replayConfig
		fs.StringVar(&rc.charts, "charts", "", "write the charts to this directory (e.g. docs)")
		fs.StringVar(&rc.trace, "trace", replayTrace, "the trace to replay (relative: from the repository root)")
		fs.BoolVar(&rc.longPeaks, "long-peaks", false, "also replay rooms from the peak of regular usage over hours or days (evaluation code), 1h and 8h jobs")
		_ = fs.Parse(args)
		var root string
		if root, err = cluster.RepoRoot(); err == nil {
			var r *replayResult
			if r, err = runReplay(ctx, root, rc, os.Stdout); err == nil {
				renderTable(os.Stdout, describeMachine(), replayRows(r, nil))
			}
		}
	case "all":
		var cfg allConfig
		cfg.flags(fs)
		_ = fs.Parse(args)
		err = runAll(ctx, cfg, os.Stdout)
	case "-h", "--help", "help":
		fmt.Fprint(os.Stdout, usage)
		return 0
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench "+cmd+":", err)
		return 1
	}
	return 0
}

// section prints a heading between the parts of `bench all`.
func section(out io.Writer, title string) {
	fmt.Fprintf(out, "\n=== %s ===\n", title)
}
