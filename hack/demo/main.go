// Command demo is `make demo`: it starts the real local cluster, runs the
// publisher, webhook and extender as local processes configured as deploy/
// configures them, and shows batch pods landing on reclaimed capacity while
// usage changes. It ends by drawing the room, what batch pods held and the
// regular pods' usage per node over the run into DEMO_IMAGE (.svg or .png;
// kube-reclaim-demo.svg in the temporary directory by default). DEMO_KEEP=1
// leaves everything running at the end; DEMO_REAL_NODE=1 then adds a real
// kubelet on which a batch pod really runs.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	d := &demo{out: os.Stdout, keep: os.Getenv("DEMO_KEEP") != "", realNodeOn: os.Getenv("DEMO_REAL_NODE") != ""}
	defer d.stop()
	return d.run(ctx)
}
