package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-reclaim/kube-reclaim/internal/certauthority"
	"github.com/kube-reclaim/kube-reclaim/internal/cli"
	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease"
	"github.com/kube-reclaim/kube-reclaim/internal/policyfile"
	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Defaults of the webhook's flags.
const (
	DefaultListenAddress          = ":8443"
	DefaultHealthAddress          = ":8081"
	DefaultMetricsAddress         = ":9443" // the admission server has the usual :8443
	DefaultTLSReloadInterval      = 5 * time.Second
	DefaultCABundleResyncInterval = time.Minute
	DefaultConfigReloadInterval   = 10 * time.Second
	// MinMaxRequestBytes is the smallest --max-request-bytes accepted: a
	// real review of an ordinary node is tens of KB.
	MinMaxRequestBytes int64 = 64 << 10
)

// Options are the flags of `kube-reclaim webhook`.
type Options struct {
	cli.Common

	ListenAddress     string
	TLSCertFile       string
	TLSKeyFile        string
	TLSReloadInterval time.Duration
	MaxRequestBytes   int64
	MaxInFlight       int
	// Oversell honours the per-node oversell labels; false (the default)
	// ignores them. Off unless asked for: a ratio multiplies a node's native
	// allocatable, so whoever can set the label sets how much the scheduler
	// may place there (the kube-reclaim-node-keys admission policy keeps
	// the labels to the administrators the cluster lists).
	Oversell bool

	leaderlease.Staleness

	SelfSigned               bool
	WebhookConfigurationName string
	ServiceName              string
	ServiceNamespace         string
	ExtraSANs                []string
	CABundleResyncInterval   time.Duration
	CASecretName             string
	CASecretNamespace        string

	// ConfigFile is the policy file shared with the publisher; the webhook
	// reads its profiles.
	ConfigFile           string
	ConfigReloadInterval time.Duration
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Common:                   cli.DefaultCommon(DefaultHealthAddress).WithMetricsAddress(DefaultMetricsAddress),
		ListenAddress:            DefaultListenAddress,
		TLSReloadInterval:        DefaultTLSReloadInterval,
		Staleness:                leaderlease.DefaultStaleness(),
		MaxRequestBytes:          DefaultMaxRequestBytes,
		MaxInFlight:              DefaultMaxInFlight,
		Oversell:                 false,
		WebhookConfigurationName: DefaultConfigurationName,
		ServiceName:              DefaultServiceName,
		ServiceNamespace:         DefaultServiceNamespace,
		CABundleResyncInterval:   DefaultCABundleResyncInterval,
		CASecretNamespace:        DefaultServiceNamespace,
		ConfigReloadInterval:     DefaultConfigReloadInterval,
	}
}

// AddFlags registers the flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Common.AddFlags(fs)
	fs.StringVar(&o.ListenAddress, "listen-address", o.ListenAddress, "Address serving the webhook over HTTPS (POST "+Path+" and "+PodPath+").")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "PEM serving certificate (with intermediates), re-read when it changes. Required with --tls-private-key-file unless --self-signed.")
	fs.StringVar(&o.TLSKeyFile, "tls-private-key-file", o.TLSKeyFile, "PEM private key of --tls-cert-file, re-read when it changes.")
	fs.DurationVar(&o.TLSReloadInterval, "tls-reload-interval", o.TLSReloadInterval, "How often the certificate files are checked for changes.")
	o.Staleness.AddFlags(fs, "the webhook injects 0")
	fs.Int64Var(&o.MaxRequestBytes, "max-request-bytes", o.MaxRequestBytes, fmt.Sprintf("Largest AdmissionReview body accepted; larger bodies get HTTP 413 (the apiserver then ignores the webhook for that write). At least %d.", MinMaxRequestBytes))
	fs.IntVar(&o.MaxInFlight, "max-in-flight", o.MaxInFlight, "Reviews decoded at once (nodes and pods together); with --max-request-bytes it bounds the webhook's memory whatever is sent (the bytes of bodies held at once are at most two --max-request-bytes per slot). A review that finds every slot taken waits up to half its call's timeout, then a node review is allowed unchanged (never refused) and a pod review is refused with 429. At least 1.")
	fs.BoolVar(&o.Oversell, "oversell", o.Oversell, "Honour native oversell: a node labelled "+reclaimable.OversellLabelPrefix+"<domain>-oversell-cpu-ratio or -memory-ratio (a label NodeRestriction keeps kubelets from setting on their own Node, and deploy/'s kube-reclaim-node-keys admission policy keeps to the administrators it lists) gets its native allocatable multiplied by the ratio. Off by default; false ignores every ratio and restores the raw allocatable of nodes inflated before, on their next status write.")
	fs.BoolVar(&o.SelfSigned, "self-signed", o.SelfSigned, "Issue the serving certificate from a self-signed CA (ECDSA P-256) and keep the caBundle of --webhook-configuration-name patched with it. The CA is shared by every replica through --ca-secret-name, or without it lives in this process's memory (one replica only).")
	fs.StringVar(&o.WebhookConfigurationName, "webhook-configuration-name", o.WebhookConfigurationName, "MutatingWebhookConfiguration whose caBundle --self-signed patches (every webhook entry).")
	fs.StringVar(&o.ServiceName, "service-name", o.ServiceName, "Service in front of the webhook; with --self-signed its DNS names go into the certificate. Empty: none.")
	fs.StringVar(&o.ServiceNamespace, "service-namespace", o.ServiceNamespace, "Namespace of --service-name.")
	fs.StringSliceVar(&o.ExtraSANs, "extra-sans", o.ExtraSANs, "With --self-signed, more DNS names or IP addresses for the certificate (for example 127.0.0.1 for a URL clientConfig).")
	fs.DurationVar(&o.CABundleResyncInterval, "ca-bundle-resync-interval", o.CABundleResyncInterval, "With --self-signed, how often the caBundle is checked and re-patched if someone reset it, and the CA Secret read again (a rotated CA is picked up within this).")
	fs.StringVar(&o.CASecretName, "ca-secret-name", o.CASecretName, "With --self-signed, the Secret (type kubernetes.io/tls) holding the CA shared by every replica: created when absent, reused, replaced before it expires (the caBundle carries old and new CA meanwhile). Empty: a CA in memory, for a single replica. Ignored without --self-signed.")
	fs.StringVar(&o.CASecretNamespace, "ca-secret-namespace", o.CASecretNamespace, "Namespace of --ca-secret-name.")
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "Policy file (the publisher's --config, usually the same ConfigMap): its profiles rewrite pods carrying the opt-in label <domain>/reclaimed=\"true\" on "+PodPath+". Without it no profile applies and such pods are refused. Reloaded when it changes; a broken new file is rejected and the last good one stays in force.")
	fs.DurationVar(&o.ConfigReloadInterval, "config-reload-interval", o.ConfigReloadInterval, "How often --config is checked for changes.")
}

// Validate reports every invalid flag at once.
func (o *Options) Validate() error {
	var errs []error
	if err := o.Common.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := cli.ValidateAddress("--listen-address", o.ListenAddress); err != nil {
		errs = append(errs, err)
	}
	if o.SelfSigned {
		errs = append(errs, o.validateSelfSigned()...)
	} else {
		if o.TLSCertFile == "" || o.TLSKeyFile == "" {
			errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file are both required unless --self-signed"))
		}
		if o.TLSReloadInterval <= 0 {
			errs = append(errs, fmt.Errorf("--tls-reload-interval must be positive, got %s", o.TLSReloadInterval))
		}
	}
	if o.ServiceName != "" {
		for _, f := range [][2]string{{"--service-name", o.ServiceName}, {"--service-namespace", o.ServiceNamespace}} {
			if msgs := validation.IsDNS1123Label(f[1]); f[1] != "" && len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("%s %q: %v", f[0], f[1], msgs))
			}
		}
	}
	if err := o.Staleness.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.ConfigFile != "" && o.ConfigReloadInterval <= 0 {
		errs = append(errs, fmt.Errorf("--config-reload-interval must be positive, got %s", o.ConfigReloadInterval))
	}
	if o.MaxInFlight < 1 {
		errs = append(errs, fmt.Errorf("--max-in-flight must be at least 1, got %d", o.MaxInFlight))
	}
	if o.MaxRequestBytes < MinMaxRequestBytes {
		errs = append(errs, fmt.Errorf("--max-request-bytes must be at least %d, got %d", MinMaxRequestBytes, o.MaxRequestBytes))
	}
	return errors.Join(errs...)
}

// validateSelfSigned checks the flags of --self-signed.
func (o *Options) validateSelfSigned() []error {
	var errs []error
	if o.TLSCertFile != "" || o.TLSKeyFile != "" {
		errs = append(errs, errors.New("--self-signed cannot be combined with --tls-cert-file/--tls-private-key-file"))
	}
	if msgs := validation.IsDNS1123Subdomain(o.WebhookConfigurationName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--webhook-configuration-name %q: %v", o.WebhookConfigurationName, msgs))
	}
	if (o.ServiceName == "") != (o.ServiceNamespace == "") {
		errs = append(errs, errors.New("--service-name and --service-namespace must both be set or both be empty"))
	}
	if o.ServiceName == "" && len(o.ExtraSANs) == 0 {
		errs = append(errs, errors.New("--self-signed needs --service-name/--service-namespace or --extra-sans for the certificate's names"))
	}
	for _, san := range o.ExtraSANs {
		if net.ParseIP(san) == nil && len(validation.IsDNS1123Subdomain(san)) > 0 {
			errs = append(errs, fmt.Errorf("--extra-sans: %q is neither an IP address nor a DNS name", san))
		}
	}
	if o.CABundleResyncInterval <= 0 {
		errs = append(errs, fmt.Errorf("--ca-bundle-resync-interval must be positive, got %s", o.CABundleResyncInterval))
	}
	if o.CASecretName != "" {
		if msgs := validation.IsDNS1123Subdomain(o.CASecretName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--ca-secret-name %q: %v", o.CASecretName, msgs))
		}
		if msgs := validation.IsDNS1123Label(o.CASecretNamespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--ca-secret-namespace %q: %v", o.CASecretNamespace, msgs))
		}
	}
	return errs
}

// hosts returns the names of the self-signed certificate.
func (o *Options) hosts() []string {
	return append(ServiceHosts(o.ServiceNamespace, o.ServiceName), o.ExtraSANs...)
}

// Run builds the webhook from the flags and serves it until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	return cli.Run(ctx, &o.Common, o, New)
}

// Webhook is the admission webhook built from its flags: the handler, its
// serving certificate and the probes and metrics server, ready to Run.
type Webhook struct {
	opts      *Options
	names     reclaimable.Names
	client    kubernetes.Interface // nil when nothing needs the API
	file      *policyfile.File
	reg       *prometheus.Registry
	health    *serving.Health
	endpoints serving.Endpoints
	tracker   *leaderlease.Tracker // nil: the publisher's Lease is not tracked
	handler   *Handler
	getCert   func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// keepCert keeps the serving certificate current until ctx ends (the
	// files re-read, or the self-signed one renewed and its caBundle patched).
	keepCert func(ctx context.Context)
}

// New builds the webhook: everything that can fail before it serves (the
// policy file, the API client, the serving certificate, the metrics
// endpoints) fails here.
func New(o *Options) (*Webhook, error) {
	w := &Webhook{opts: o, names: o.Names(), reg: prometheus.NewRegistry()}
	w.health = serving.NewHealth(w.reg)
	var err error
	// An invalid policy file stops the start, as in the publisher.
	if w.file, err = policyfile.Load(o.ConfigFile, o.ConfigReloadInterval); err != nil {
		return nil, err
	}
	if o.PublisherLeaseName != "" || o.SelfSigned || o.ConfigFile != "" {
		cfg, err := o.RESTConfig("kube-reclaim-webhook")
		if err != nil {
			return nil, err
		}
		if w.client, err = kubernetes.NewForConfig(cfg); err != nil {
			return nil, fmt.Errorf("creating the API client: %w", err)
		}
	}
	if w.tracker = o.NewTracker(w.client); w.tracker != nil {
		w.health.AddReadyCheck("publisher-lease", func() error {
			if !w.tracker.HasSynced() {
				return fmt.Errorf("lease %s/%s not synced yet", o.PublisherLeaseNamespace, o.PublisherLeaseName)
			}
			return nil
		})
		w.health.AddLiveCheck("publisher-lease", w.tracker.Check)
	}
	if err := w.newCertificate(); err != nil {
		return nil, err
	}
	w.handler = NewHandler(w.names, o.StaleAfter, w.tracker.Alive, w.reg)
	w.handler.MaxRequestBytes = o.MaxRequestBytes
	w.handler.SetMaxInFlight(o.MaxInFlight)
	w.handler.SetOversell(o.Oversell)
	if w.endpoints, err = o.Endpoints("kube-reclaim-webhook"); err != nil {
		return nil, err
	}
	return w, nil
}

// newCertificate sets up the serving certificate: self-signed (from an
// in-memory CA or the shared CA Secret) or read from the files.
func (w *Webhook) newCertificate() error {
	o := w.opts
	if o.SelfSigned {
		keeper := &caBundleKeeper{client: w.client.AdmissionregistrationV1(), name: o.WebhookConfigurationName,
			resync: o.CABundleResyncInterval}
		var err error
		if o.CASecretName != "" {
			// The keeper fetches the shared CA and issues the certificate.
			keeper.secret = certauthority.NewSecret(w.client.CoreV1(), o.CASecretNamespace, o.CASecretName)
			keeper.certs, err = certauthority.NewPendingSelfSigned(o.hosts())
			logrus.WithFields(logrus.Fields{"hosts": o.hosts(), "secret": o.CASecretNamespace + "/" + o.CASecretName}).Info("self-signed serving certificate from the shared CA")
		} else if keeper.certs, err = certauthority.NewSelfSigned(o.hosts()); err == nil {
			logrus.WithFields(logrus.Fields{"hosts": o.hosts(), "serial": keeper.certs.Leaf().SerialNumber.String()}).Info("generated a self-signed serving certificate from an in-memory CA")
		}
		if err != nil {
			return err
		}
		w.getCert, w.keepCert = keeper.certs.GetCertificate, keeper.run
		w.health.AddReadyCheck("serving-certificate", keeper.certs.Check)
		w.health.AddReadyCheck("ca-bundle", keeper.check)
	} else {
		reloader, err := serving.NewCertReloader(o.TLSCertFile, o.TLSKeyFile)
		if err != nil {
			return fmt.Errorf("loading the serving certificate: %w", err)
		}
		w.getCert = reloader.GetCertificate
		w.keepCert = func(ctx context.Context) { reloader.Run(ctx, o.TLSReloadInterval) }
		w.health.AddReadyCheck("serving-certificate", reloader.Check)
	}
	// For the expiry alert of deploy/components/monitoring; a self-signed
	// leaf never outlives its CA, so this covers the CA too.
	w.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "kube_reclaim", Subsystem: "webhook",
		Name: "serving_certificate_expiry_timestamp_seconds", Help: "Unix time at which the serving certificate in use expires (0 while there is none)."},
		func() float64 {
			if c, err := w.getCert(nil); err == nil && c != nil && c.Leaf != nil {
				return float64(c.Leaf.NotAfter.Unix())
			}
			return 0
		}))
	return nil
}

// Run serves the webhook over HTTPS and /healthz, /readyz, /metrics over
// HTTP until ctx ends or a part fails; the first to fail stops every part.
// It returns that failure, or nil on a clean shutdown.
func (w *Webhook) Run(ctx context.Context) error {
	o := w.opts
	// The informers and the policy file's reloads end with the group's
	// context, which ends when the group does; Run returns once they have.
	var background sync.WaitGroup
	defer background.Wait()
	g, ctx := errgroup.WithContext(ctx)
	if o.ConfigFile != "" {
		w.handler.SetPodRewriter(startProfiles(ctx, &background, w.client, w.names, w.file, w.reg, w.health))
	} else {
		// No profiles: an opted-in pod is refused with a message saying so
		// rather than created without the reclaimed resources it opted into.
		w.handler.SetPodRewriter(NewProfileRewriter(w.names, w.file.Config, nil, nil, w.reg))
	}
	logrus.WithFields(logrus.Fields{
		"address": o.ListenAddress, "domain": w.names.Domain, "staleAfter": o.StaleAfter,
		"publisherLease": o.PublisherLeaseNamespace + "/" + o.PublisherLeaseName,
		"config":         o.ConfigFile, "profiles": len(w.file.Config().Profiles),
		"maxInFlight": o.MaxInFlight, "oversell": o.Oversell,
	}).Info("starting webhook")
	if w.tracker != nil {
		g.Go(func() error { w.tracker.Run(ctx); return nil })
	}
	g.Go(func() error { w.keepCert(ctx); return nil })
	g.Go(func() error { return w.health.Serve(ctx, w.endpoints) })
	g.Go(func() error {
		return serving.ListenAndServe(ctx, serving.NewServer(o.ListenAddress, w.handler), serving.TLSConfig(w.getCert))
	})
	return cli.Wait(g)
}
