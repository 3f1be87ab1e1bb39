// Package extender is the kube-scheduler extender of kube-reclaim
// (`kube-reclaim extender`). It serves POST /filter, /prioritize and /bind
// with the k8s.io/kube-scheduler/extender/v1 types, nodeCacheCapable: the
// scheduler sends node names only and node and pod informers are the source
// of truth.
//
// Free room on a node is the published reclaimable annotation (zero when
// stale, see reclaimable.Judge; never above the node's native allocatable
// or capacity) minus the reclaimed requests of the non-terminal pods bound
// there minus the pods this extender bound that the informer has not shown
// bound yet (assumptions). Bind checks the room and records the assumption
// under one lock before creating the Binding, so concurrent binds never
// over-book a node.
//
// Topology: one extender per scheduler pod, a sidecar listening on
// 127.0.0.1 only, which its scheduler's configuration names. The verbs
// carry no authentication, so nothing but the containers of that pod may
// reach them; and even from there /bind places only pods it manages (of a
// --scheduler-name, asking reclaimed resources, as the API server holds
// them) on a node its own /filter passed for that pod lately, and no body
// makes the verbs keep more than their bounds (wire.go, --max-in-flight). Assumptions live in the memory of one process, and only the
// leading scheduler calls its own extender, so one assume cache serves the
// one active scheduler; the standby's extender keeps warm informers. When
// the scheduler fails over, the risk is that of a restart: binds of the
// last moments not yet in the new leader's extender's informer.
package extender

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-reclaim/kube-reclaim/internal/cli"
	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease"
	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/placement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Strategies of the prioritize verb (placement.Score).
const (
	StrategySpread  = placement.StrategySpread
	StrategyBinpack = placement.StrategyBinpack
)

// Defaults of the extender's flags.
const (
	// DefaultListenAddress serves only the scheduler of the same pod.
	DefaultListenAddress = "127.0.0.1:8888"
	DefaultHealthAddress = ":8082"
	// DefaultAssumeTimeout is how long a pod this extender bound counts
	// against its node before the pod informer shows it bound. It only has to
	// outlive the watch lag (milliseconds normally, seconds under load;
	// kube_reclaim_extender_assumption_confirm_duration_seconds measures it):
	// expiring too early risks over-booking, too late only holds room of a
	// pod that was never bound, which happens only when a Binding's outcome
	// was unknown and the pod was then deleted or bound elsewhere by others.
	DefaultAssumeTimeout = 30 * time.Second
	// DefaultMaxInFlight bounds the filter and prioritize calls served at
	// once. kube-scheduler sends one at a time (its scheduling cycle is
	// serial): the slots beyond the first are for what else reaches the
	// port, and the verbs' work is CPU.
	DefaultMaxInFlight = 32
	// DefaultMaxInFlightBinds bounds the bind calls served at once.
	// kube-scheduler binds from parallel binding cycles, and each bind holds
	// its slot while its Binding call waits on the API server, so the
	// slots cap the binds per second at slots ÷ Binding latency: they must
	// cover the scheduler's rate times a loaded API server's latency.
	// With 32, a slow API server held reclaimed placement well below the
	// scheduler's own rate (docs/benchmarks.md, P2). A slot costs a
	// goroutine and a body of at most maxBindBytes.
	DefaultMaxInFlightBinds = 256
)

// certReloadInterval is how often the serving certificate files are polled.
const certReloadInterval = 10 * time.Second

// Options are the flags of `kube-reclaim extender`.
type Options struct {
	cli.Common
	// ListenAddress serves /filter, /prioritize and /bind.
	ListenAddress string
	// TLSCertFile and TLSPrivateKeyFile switch the server to HTTPS (both or neither).
	TLSCertFile       string
	TLSPrivateKeyFile string
	leaderlease.Staleness
	// Strategy is spread or binpack.
	Strategy string
	// AssumeTimeout ends an assumption the informer has not confirmed.
	AssumeTimeout time.Duration
	// RequireEnforced refuses reclaimed pods whose containers lack the
	// native limits the pod webhook sets (see package enforcement).
	RequireEnforced bool
	// SchedulerNames are the spec.schedulerName values of the pods bind
	// places; any other pod is refused.
	SchedulerNames []string
	// MaxInFlight bounds the filter and prioritize calls served at once,
	// MaxInFlightBinds the bind calls.
	MaxInFlight, MaxInFlightBinds int
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Common:           cli.DefaultCommon(DefaultHealthAddress),
		ListenAddress:    DefaultListenAddress,
		Staleness:        leaderlease.DefaultStaleness(),
		Strategy:         StrategySpread,
		AssumeTimeout:    DefaultAssumeTimeout,
		RequireEnforced:  true,
		SchedulerNames:   []string{SchedulerName},
		MaxInFlight:      DefaultMaxInFlight,
		MaxInFlightBinds: DefaultMaxInFlightBinds,
	}
}

// AddFlags registers the flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Common.AddFlags(fs)
	fs.StringVar(&o.ListenAddress, "listen-address", o.ListenAddress, "Address serving the scheduler extender verbs POST /filter, /prioritize and /bind (HTTPS when --tls-cert-file is set, else HTTP). The verbs carry no authentication: keep it on 127.0.0.1, beside the one scheduler that calls it.")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "Serving certificate (PEM) for HTTPS, re-read when the file changes. Requires --tls-private-key-file.")
	fs.StringVar(&o.TLSPrivateKeyFile, "tls-private-key-file", o.TLSPrivateKeyFile, "Private key (PEM) of --tls-cert-file.")
	o.Staleness.AddFlags(fs, "the node offers no reclaimed room")
	fs.StringVar(&o.Strategy, "strategy", o.Strategy, "Strategy of the prioritize verb: spread (favour nodes with the most reclaimed room left) or binpack (the least). Only a scheduler configured with prioritizeVerb calls it (the legacy policy.json); the shipped KubeSchedulerConfiguration scores in its profile instead (NodeResourcesFit, LeastAllocated or MostAllocated).")
	fs.BoolVar(&o.RequireEnforced, "require-enforced", o.RequireEnforced, "Refuse to place a pod asking for reclaimed resources unless every such container carries the native cpu/memory limits and explicit requests the kube-reclaim pod webhook sets (kubelet enforces its grant through them). Such a pod was created while the pod webhook was not configured; it stays Pending with a message naming what is missing. Set to false only where pods are enforced otherwise.")
	fs.StringSliceVar(&o.SchedulerNames, "scheduler-name", o.SchedulerNames, "Scheduler name (a profile's schedulerName) whose pods /bind places; repeat the flag or separate names by commas for several. A pod naming any other scheduler is refused, as is one asking no reclaimed resource or bound to a node this extender's /filter did not pass for it.")
	fs.IntVar(&o.MaxInFlight, "max-in-flight", o.MaxInFlight, "Calls of each of the filter and prioritize verbs served at once; a call that finds every slot of its verb taken for 250ms is answered 429 (kube-scheduler retries the pod). A call's body is read before it takes a slot, within 2s. Bounds the extender's work and memory whatever its callers send.")
	fs.IntVar(&o.MaxInFlightBinds, "max-in-flight-binds", o.MaxInFlightBinds, "Bind calls served at once, answered 429 as --max-in-flight. A bind holds its slot while its Binding waits on the API server, so binds per second are at most this divided by the Binding's latency: keep it above the scheduler's binding rate times a loaded API server's latency.")
	fs.DurationVar(&o.AssumeTimeout, "assume-timeout", o.AssumeTimeout, "How long a pod bound by this extender keeps its room reserved while the pod informer has not shown it bound. Must exceed the watch lag (see kube_reclaim_extender_assumption_confirm_duration_seconds); too short risks over-booking.")
}

// Validate reports every invalid flag at once.
func (o *Options) Validate() error {
	errs := []error{o.Common.Validate()}
	if err := cli.ValidateAddress("--listen-address", o.ListenAddress); err != nil {
		errs = append(errs, err)
	}
	if (o.TLSCertFile == "") != (o.TLSPrivateKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file must be set together"))
	}
	errs = append(errs, o.Staleness.Validate())
	if o.MaxInFlight <= 0 {
		errs = append(errs, fmt.Errorf("--max-in-flight must be positive, got %d", o.MaxInFlight))
	}
	if o.MaxInFlightBinds <= 0 {
		errs = append(errs, fmt.Errorf("--max-in-flight-binds must be positive, got %d", o.MaxInFlightBinds))
	}
	if o.AssumeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--assume-timeout must be positive, got %s", o.AssumeTimeout))
	}
	if len(o.SchedulerNames) == 0 {
		errs = append(errs, errors.New("--scheduler-name: at least one scheduler name is required"))
	}
	for _, n := range o.SchedulerNames {
		if n == "" {
			errs = append(errs, errors.New("--scheduler-name: a scheduler name must not be empty"))
			break
		}
	}
	if o.Strategy != StrategySpread && o.Strategy != StrategyBinpack {
		errs = append(errs, fmt.Errorf("--strategy: %q is neither %s nor %s", o.Strategy, StrategySpread, StrategyBinpack))
	}
	return errors.Join(errs...)
}

// core wires the cache, informers and verbs server; New and the tests build
// it the same way.
type core struct {
	cache     *placement.Cache
	informers *informers
	tracker   *leaderlease.Tracker
	server    *server
}

type config struct {
	names           reclaimable.Names
	strategy        string
	staleAfter      time.Duration
	assumeTimeout   time.Duration
	requireEnforced bool
	// schedulerNames are --scheduler-name; empty means SchedulerName.
	schedulerNames []string
	// maxInFlight and maxInFlightBinds are --max-in-flight and
	// --max-in-flight-binds; 0 means the default.
	maxInFlight, maxInFlightBinds int
}

func newExtender(client kubernetes.Interface, cfg config, tracker *leaderlease.Tracker, reg prometheus.Registerer) (*core, error) {
	m := newMetrics(reg)
	c := placement.NewCache(cfg.staleAfter, cfg.assumeTimeout, bindAPITimeout, tracker.Alive, m.cache)
	registerCacheGauges(reg, c)
	inf, err := newInformers(client, cfg.names, c)
	if err != nil {
		return nil, err
	}
	registerPendingGauges(reg, inf.pods.GetIndexer())
	e := &core{cache: c, informers: inf, tracker: tracker}
	e.server = newServer(cfg.names, cfg.strategy, c, inf, client, e.synced, m)
	e.server.requireEnforced = cfg.requireEnforced
	e.server.setMaxInFlight(cmp.Or(cfg.maxInFlight, DefaultMaxInFlight), cmp.Or(cfg.maxInFlightBinds, DefaultMaxInFlightBinds))
	if len(cfg.schedulerNames) > 0 {
		e.server.schedulerNames = map[string]bool{}
		for _, n := range cfg.schedulerNames {
			e.server.schedulerNames[n] = true
		}
	}
	return e, nil
}

func (e *core) synced() bool { return e.informers.hasSynced() && e.tracker.HasSynced() }

// registerHealth makes /readyz fail until the caches synced, and
// /healthz once an informer stopped or has failed to list and watch for
// minutes (watchhealth): the verbs would go on answering from a cache that
// no longer changes.
func (e *core) registerHealth(h *serving.Health) {
	h.AddReadyCheck("informers", func() error {
		if !e.synced() {
			return errors.New("node, pod and publisher lease informers not synced yet")
		}
		return nil
	})
	h.AddLiveCheck("informers", func() error { return errors.Join(e.informers.check(), e.tracker.Check()) })
}

// start runs the informers, the lease tracker and the assumption expiry in
// wg until ctx ends.
func (e *core) start(ctx context.Context, wg *sync.WaitGroup) {
	e.informers.run(ctx, wg)
	wg.Go(func() { e.tracker.Run(ctx) })
	wg.Go(func() { e.cache.RunExpiry(ctx, e.cache.ExpiryInterval()) })
}

// waitForSync blocks until the caches synced or ctx ended.
func (e *core) waitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), e.informers.nodes.HasSynced, e.informers.pods.HasSynced, e.tracker.HasSynced)
}

// Run builds the extender from the flags and serves it until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	return cli.Run(ctx, &o.Common, o, New)
}

// Extender is the scheduler extender built from its flags: the node cache,
// the informers, the verbs server and the probes and metrics server, ready
// to Run.
type Extender struct {
	opts      *Options
	core      *core
	health    *serving.Health
	endpoints serving.Endpoints
	certs     *serving.CertReloader // nil: the verbs are served over HTTP
	listening atomic.Bool
}

// New builds the extender: everything that can fail before it serves (the
// API client, the informers, the serving certificate, the metrics
// endpoints) fails here.
func New(o *Options) (*Extender, error) {
	restCfg, err := o.RESTConfig("kube-reclaim-extender")
	if err != nil {
		return nil, err
	}
	// Protobuf: listing and watching 150,000 pods costs a fraction of JSON.
	restCfg.ContentType = "application/vnd.kubernetes.protobuf"
	restCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("creating API client: %w", err)
	}
	reg := prometheus.NewRegistry()
	e := &Extender{opts: o, health: serving.NewHealth(reg)}
	if e.endpoints, err = o.Endpoints("kube-reclaim-extender"); err != nil {
		return nil, err
	}
	e.core, err = newExtender(client, config{names: o.Names(), strategy: o.Strategy, staleAfter: o.StaleAfter,
		assumeTimeout: o.AssumeTimeout, requireEnforced: o.RequireEnforced, schedulerNames: o.SchedulerNames, maxInFlight: o.MaxInFlight,
		maxInFlightBinds: o.MaxInFlightBinds},
		o.NewTracker(client), reg)
	if err != nil {
		return nil, err
	}
	e.core.registerHealth(e.health)
	// Ready means the verbs answer: the listener is bound only after the
	// caches synced, so /readyz must wait for it too, or a scheduler (or a
	// test) sent there by readiness meets "connection refused".
	e.health.AddReadyCheck("listener", func() error {
		if !e.listening.Load() {
			return errors.New("the extender verbs are not being served yet")
		}
		return nil
	})
	if o.TLSCertFile != "" {
		if e.certs, err = serving.NewCertReloader(o.TLSCertFile, o.TLSPrivateKeyFile); err != nil {
			return nil, fmt.Errorf("serving certificate: %w", err)
		}
		e.health.AddReadyCheck("serving-certificate", e.certs.Check)
	}
	return e, nil
}

// Run serves until ctx ends or a part fails: informers first, /readyz
// failing until they synced, then the extender verbs; the first part to
// fail stops every part, with a graceful shutdown. It returns that failure,
// or nil on a clean shutdown.
func (e *Extender) Run(ctx context.Context) error {
	// The informers and loops end with the group's context, which ends when
	// the group does; Run returns once they have.
	var background sync.WaitGroup
	defer background.Wait()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return wrap("health and metrics servers", e.health.Serve(ctx, e.endpoints)) })
	e.core.start(ctx, &background)
	if e.certs != nil {
		g.Go(func() error { e.certs.Run(ctx, certReloadInterval); return nil })
	}
	g.Go(func() error { return e.serveVerbs(ctx) })
	return cli.Wait(g)
}

// serveVerbs waits for the caches to sync, then serves the verbs until ctx
// ends.
func (e *Extender) serveVerbs(ctx context.Context) error {
	o := e.opts
	log := logrus.WithFields(logrus.Fields{"listen": o.ListenAddress, "strategy": o.Strategy,
		"staleAfter": o.StaleAfter, "assumeTimeout": o.AssumeTimeout, "domain": o.ResourceDomain,
		"requireEnforced": o.RequireEnforced, "schedulerNames": o.SchedulerNames, "maxInFlight": o.MaxInFlight, "maxInFlightBinds": o.MaxInFlightBinds})
	log.Info("extender starting; waiting for the node and pod informers to sync")
	if !e.core.waitForSync(ctx) {
		return nil // ctx ended first
	}
	log.Info("informers synced; serving the extender verbs")
	ln, err := listenVerbs(ctx, o.ListenAddress)
	if err != nil {
		return fmt.Errorf("extender server: %w", err)
	}
	var tlsCfg *tls.Config
	if e.certs != nil {
		tlsCfg = serving.TLSConfig(e.certs.GetCertificate)
	}
	e.listening.Store(true)
	return wrap("extender server", serving.Serve(ctx, serving.NewServer(o.ListenAddress, e.core.server.handler()), ln, tlsCfg))
}

func wrap(what string, err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// listenVerbs listens for the verbs' connections. Without TCP keep-alive
// probes: the only peer is the scheduler on the same host (127.0.0.1), whose
// idle connections the server's IdleTimeout closes, and kube-scheduler
// dials a new connection for most binds (it keeps two idle ones while binds
// overlap), each of which would otherwise cost four setsockopt calls.
func listenVerbs(ctx context.Context, addr string) (net.Listener, error) {
	return (&net.ListenConfig{KeepAlive: -1}).Listen(ctx, "tcp", addr)
}
