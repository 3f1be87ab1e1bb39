package cli

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Common holds the flags every role has.
type Common struct {
	Kubeconfig     string
	ResourceDomain string
	HealthAddress  string
	// MetricsAddress serves /metrics over HTTPS to callers the API server
	// authenticates and authorizes; empty turns it off.
	MetricsAddress     string
	MetricsTLSCertFile string
	MetricsTLSKeyFile  string
	LogLevel           string
	LogFormat          string
	// MetricsTokenAudiences: the audiences a scraper's token must be issued
	// for; none: the API server's own.
	MetricsTokenAudiences []string
	// QPS and Burst of the API client; the defaults of client-go (5/10) are far
	// too low for a 5000-node cluster.
	QPS   float32
	Burst int
	// MetricsAuthQPS, MetricsAuthBurst and MetricsAuthMaxInFlight bound the
	// TokenReviews and SubjectAccessReviews of the metrics server, sent by a
	// client of their own: who calls /metrics decides how many are needed.
	MetricsAuthQPS         float32
	MetricsAuthBurst       int
	MetricsAuthMaxInFlight int
}

// DefaultMetricsAddress is where /metrics is served by default, the port of
// kube-scheduler's and controller-runtime's secure metrics.
const DefaultMetricsAddress = ":8443"

// DefaultCommon returns the defaults for a role whose health server listens on healthAddr.
func DefaultCommon(healthAddr string) Common {
	return Common{ResourceDomain: reclaimable.DefaultDomain, HealthAddress: healthAddr, MetricsAddress: DefaultMetricsAddress,
		LogLevel: "info", LogFormat: "text", QPS: 50, Burst: 100,
		// A scraper's answers are cached for minutes: a few reviews a second
		// serve many scrapers, and are all a flood of forged tokens gets.
		MetricsAuthQPS: 5, MetricsAuthBurst: 10, MetricsAuthMaxInFlight: serving.DefaultMaxInFlightReviews}
}

// WithMetricsAddress returns c with another default --metrics-address, for a
// role whose own server has DefaultMetricsAddress's port.
func (c Common) WithMetricsAddress(addr string) Common {
	c.MetricsAddress = addr
	return c
}

// AddFlags registers the common flags.
func (c *Common) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "Path to a kubeconfig file; in-cluster configuration when empty.")
	fs.StringVar(&c.ResourceDomain, "resource-domain", c.ResourceDomain, "Domain of the extended resources and annotations (<domain>/reclaimed-cpu, <domain>/reclaimable). Must be the same for every role.")
	fs.StringVar(&c.HealthAddress, "health-address", c.HealthAddress, "Address serving the probes /healthz and /readyz over plain HTTP.")
	fs.StringVar(&c.MetricsAddress, "metrics-address", c.MetricsAddress, "Address serving /metrics over HTTPS to callers the API server authenticates (TokenReview) and allows to get the non-resource URL /metrics (SubjectAccessReview); empty turns it off.")
	fs.StringVar(&c.MetricsTLSCertFile, "metrics-tls-cert-file", c.MetricsTLSCertFile, "Certificate (PEM) of the metrics server, reloaded when it changes; a self-signed certificate generated at start when empty.")
	fs.StringVar(&c.MetricsTLSKeyFile, "metrics-tls-private-key-file", c.MetricsTLSKeyFile, "Private key (PEM) of --metrics-tls-cert-file.")
	fs.StringSliceVar(&c.MetricsTokenAudiences, "metrics-token-audiences", c.MetricsTokenAudiences, "Audiences a /metrics caller's token must be issued for (TokenReview spec.audiences, checked against the audiences answered); empty: the API server's own. With an audience of its own, a scraper's token (a projected service account token with that audience) is worthless against the API server.")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "Log level: debug, info, warn or error.")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "Log format: text or json.")
	fs.Float32Var(&c.QPS, "kube-api-qps", c.QPS, "Queries per second allowed to the API server.")
	fs.IntVar(&c.Burst, "kube-api-burst", c.Burst, "Burst of queries allowed to the API server.")
	fs.Float32Var(&c.MetricsAuthQPS, "metrics-auth-qps", c.MetricsAuthQPS, "Queries per second of the metrics server's own API client, which sends the TokenReviews and SubjectAccessReviews of /metrics callers (apart from --kube-api-qps, so that callers never delay the role's own API calls).")
	fs.IntVar(&c.MetricsAuthBurst, "metrics-auth-burst", c.MetricsAuthBurst, "Burst of queries of the metrics server's own API client.")
	fs.IntVar(&c.MetricsAuthMaxInFlight, "metrics-auth-max-in-flight", c.MetricsAuthMaxInFlight, "Most TokenReviews and SubjectAccessReviews the metrics server sends at once; a request that needs one more is answered 429 (answers are cached, so scrapers rarely need one).")
}

// Validate checks the common flags; it returns every problem at once.
func (c *Common) Validate() error {
	var errs []error
	if _, err := reclaimable.NewNames(c.ResourceDomain); err != nil {
		errs = append(errs, fmt.Errorf("--resource-domain: %w", err))
	}
	if err := ValidateAddress("--health-address", c.HealthAddress); err != nil {
		errs = append(errs, err)
	}
	if c.MetricsAddress != "" {
		if err := ValidateAddress("--metrics-address", c.MetricsAddress); err != nil {
			errs = append(errs, err)
		} else if c.MetricsAddress == c.HealthAddress {
			errs = append(errs, fmt.Errorf("--metrics-address and --health-address are both %q: metrics need their own port", c.MetricsAddress))
		}
	}
	if (c.MetricsTLSCertFile == "") != (c.MetricsTLSKeyFile == "") {
		errs = append(errs, errors.New("--metrics-tls-cert-file and --metrics-tls-private-key-file go together"))
	}
	if slices.Contains(c.MetricsTokenAudiences, "") {
		errs = append(errs, fmt.Errorf("--metrics-token-audiences: %q has an empty audience", c.MetricsTokenAudiences))
	}
	if _, err := logrus.ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("--log-level: %w", err))
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format: %q is neither text nor json", c.LogFormat))
	}
	if c.QPS <= 0 || c.Burst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	if c.MetricsAuthQPS <= 0 || c.MetricsAuthBurst <= 0 || c.MetricsAuthMaxInFlight <= 0 {
		errs = append(errs, errors.New("--metrics-auth-qps, --metrics-auth-burst and --metrics-auth-max-in-flight must be positive"))
	}
	return errors.Join(errs...)
}

// ValidateAddress checks a host:port listen address.
func ValidateAddress(flag, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%s: %q is not host:port: %w", flag, addr, err)
	}
	return nil
}

// Names returns the validated resource names (call after Validate).
func (c *Common) Names() reclaimable.Names { return reclaimable.MustNames(c.ResourceDomain) }

// SetupLogging applies the log flags to the standard logrus logger, and
// routes klog (client-go's logger) into it.
func (c *Common) SetupLogging() {
	if lvl, err := logrus.ParseLevel(c.LogLevel); err == nil {
		logrus.SetLevel(lvl)
	}
	if c.LogFormat == "json" {
		logrus.SetFormatter(&logrus.JSONFormatter{})
	} else {
		logrus.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	}
	routeKlog(logrus.StandardLogger())
}

// Endpoints returns where the role serves its probes and its metrics. When
// the metrics server is on, it gets an API client of its own for its
// TokenReviews and SubjectAccessReviews, made from the kubeconfig (or the
// in-cluster configuration) with userAgent + "/metrics-auth", the
// --metrics-auth-* rate and its own connections: however many reviews the
// callers of /metrics cause, the role's own client (its Lease renewals among
// its calls) never waits behind them, in its rate limiter or on a shared
// HTTP/2 connection.
func (c *Common) Endpoints(userAgent string) (serving.Endpoints, error) {
	e := serving.Endpoints{HealthAddress: c.HealthAddress, Metrics: serving.SecureMetrics{
		Address: c.MetricsAddress, CertFile: c.MetricsTLSCertFile, KeyFile: c.MetricsTLSKeyFile, MaxInFlightReviews: c.MetricsAuthMaxInFlight,
		TokenAudiences: c.MetricsTokenAudiences}}
	if c.MetricsAddress == "" {
		return e, nil
	}
	cfg, err := c.RESTConfig(userAgent + "/metrics-auth")
	if err != nil {
		return e, fmt.Errorf("--metrics-address: authenticating scrapers needs the API server (or --metrics-address= to turn metrics off): %w", err)
	}
	cfg.QPS, cfg.Burst = c.MetricsAuthQPS, c.MetricsAuthBurst
	// A dialer of its own keeps client-go from sharing the role's cached
	// transport, so the reviews travel on connections of their own.
	cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if e.Metrics.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return e, fmt.Errorf("--metrics-address: %w", err)
	}
	return e, nil
}

// RESTConfig loads the kubeconfig, or the in-cluster configuration when none is given.
func (c *Common) RESTConfig(userAgent string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if c.Kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = c.QPS, c.Burst
	cfg.UserAgent = userAgent
	// Every role talks to built-in types only (and to metrics.k8s.io, which
	// metrics-server serves in protobuf too): protobuf decodes several times
	// faster than JSON and with less garbage, which is what a list of
	// 150,000 pods or PodMetrics costs. A server that cannot encode protobuf
	// answers JSON, the second accepted type.
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg, nil
}
