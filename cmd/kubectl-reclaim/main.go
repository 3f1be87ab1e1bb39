// Command kubectl-reclaim is the kube-reclaim kubectl plugin: put it on PATH
// and run `kubectl reclaim nodes`, `kubectl reclaim explain NODE` or
// `kubectl reclaim pods`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kube-reclaim/kube-reclaim/internal/kubectlreclaim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := kubectlreclaim.Main(ctx, os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	stop()
	os.Exit(code)
}
