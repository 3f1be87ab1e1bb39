// Package kubectlreclaim implements kubectl-reclaim, the kubectl plugin that
// shows the operator's view of kube-reclaim: what every node publishes, why
// (the policy terms from the annotation's explanation), where the reclaimed
// pods run or why they wait, and what a policy would reclaim on any cluster,
// kube-reclaim installed or not.
//
// Install the binary as kubectl-reclaim anywhere on PATH and run
// `kubectl reclaim nodes`, `kubectl reclaim explain NODE`,
// `kubectl reclaim pods`, `kubectl reclaim simulate` or `kubectl reclaim doctor`. The usual kubeconfig flags (--kubeconfig, --context,
// -n, ...) come from k8s.io/cli-runtime.
package kubectlreclaim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Clients are the API clients a command uses.
type Clients struct {
	Kube kubernetes.Interface
	// Metrics is the metrics.k8s.io client; nil when none could be built.
	// Commands never fail because the metrics API is unavailable.
	Metrics metricsclient.Interface
	// Dynamic reads what has no typed client here (doctor's APIService);
	// nil when none could be built.
	Dynamic dynamic.Interface
	// ChunkSize is the page size of list requests (--chunk-size).
	ChunkSize int64
}

// pager lists in pages of c.ChunkSize, like kubectl get: a large cluster's
// pods come in several bounded responses instead of one huge one.
func (c Clients) pager(list pager.ListPageFunc) *pager.ListPager {
	p := pager.New(list)
	p.PageSize = c.ChunkSize
	return p
}

// Options are shared by every subcommand.
type Options struct {
	// ConfigFlags are the usual kubectl connection flags.
	ConfigFlags    *genericclioptions.ConfigFlags
	ResourceDomain string
	// ChunkSize is --chunk-size: items per list request, 0 for one request.
	ChunkSize int64
	Streams   genericiooptions.IOStreams
	// Now is the clock; tests replace it.
	Now func() time.Time
	// NewClients builds the clients from ConfigFlags; tests replace it.
	NewClients func() (Clients, error)
}

// NewOptions returns the defaults.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	o := &Options{
		ConfigFlags:    genericclioptions.NewConfigFlags(true),
		ResourceDomain: reclaimable.DefaultDomain,
		ChunkSize:      500,
		Streams:        streams,
		Now:            time.Now,
	}
	o.NewClients = o.clientsFromFlags
	return o
}

func (o *Options) clientsFromFlags() (Clients, error) {
	cfg, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return Clients{}, err
	}
	cfg.UserAgent = "kubectl-reclaim"
	// Listing every pod of a large cluster is a few requests; keep the
	// client-side limiter out of the way.
	cfg.QPS, cfg.Burst = 50, 100
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clients{}, err
	}
	c := Clients{Kube: kube}
	if m, err := metricsclient.NewForConfig(cfg); err == nil {
		c.Metrics = m
	}
	if d, err := dynamic.NewForConfig(cfg); err == nil {
		c.Dynamic = d
	}
	return c, nil
}

// clients builds the clients for one command run.
func (o *Options) clients() (Clients, error) {
	c, err := o.NewClients()
	c.ChunkSize = o.ChunkSize
	return c, err
}

// validateCommon reports the problems of the shared flags.
func (o *Options) validateCommon() []error {
	var errs []error
	if _, err := o.names(); err != nil {
		errs = append(errs, err)
	}
	if o.ChunkSize < 0 {
		errs = append(errs, fmt.Errorf("--chunk-size: %d must not be negative", o.ChunkSize))
	}
	return errs
}

// names validates --resource-domain.
func (o *Options) names() (reclaimable.Names, error) {
	n, err := reclaimable.NewNames(o.ResourceDomain)
	if err != nil {
		return n, fmt.Errorf("--resource-domain: %w", err)
	}
	return n, nil
}

// NewCommand returns the kubectl-reclaim root command with its subcommands.
func NewCommand(o *Options) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-reclaim",
		Short: "Inspect kube-reclaim: published reclaimable capacity, its explanation, and the reclaimed pods",
		Long: `kubectl reclaim shows what kube-reclaim publishes on every node and why.

  kubectl reclaim nodes          published, requested and free reclaimed CPU/memory per node
  kubectl reclaim explain NODE   every term of the policy formula behind a node's values
  kubectl reclaim pods           the pods using reclaimed resources, where they run or why they wait
  kubectl reclaim simulate       what a policy would reclaim on every node, read-only, installed or not
  kubectl reclaim uninstall      after kubectl delete -k: remove the annotation and reclaimed resources from every node
  kubectl reclaim doctor         check an install (admission policies, webhook CA, Lease, metrics, ...) and say what to fix

Resource cells show cpu/memory: CPU in cores or millicores (2, 2500m), memory in
binary units (512Mi, 2.5Gi). As with kubectl get, nodes and pods print with
-o wide, json, yaml, name, jsonpath=... or go-template=..., and --no-headers;
json and yaml carry exact integers (millicores and bytes).`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl reclaim"},
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	root.SetIn(o.Streams.In)
	root.SetOut(o.Streams.Out)
	root.SetErr(o.Streams.ErrOut)
	fs := root.PersistentFlags()
	o.ConfigFlags.AddFlags(fs)
	fs.StringVar(&o.ResourceDomain, "resource-domain", o.ResourceDomain,
		"Domain of the reclaimed resources and the node annotation (<domain>/reclaimed-cpu, <domain>/reclaimable); must match the one kube-reclaim runs with.")
	fs.Int64Var(&o.ChunkSize, "chunk-size", o.ChunkSize,
		"Return large lists in chunks rather than all at once. Pass 0 to disable.")
	root.AddCommand(newNodesCommand(o), newExplainCommand(o), newPodsCommand(o), newSimulateCommand(o), newUninstallCommand(o), newDoctorCommand(o))
	return root
}

// Main runs the plugin with args (without the program name) and returns the
// process exit code; errors are printed to streams.ErrOut.
func Main(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	root := NewCommand(NewOptions(streams))
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		if errors.Is(err, context.Canceled) {
			return 130
		}
		fmt.Fprintln(streams.ErrOut, "error:", err)
		return 1
	}
	return 0
}
