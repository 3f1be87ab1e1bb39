// Package stack runs the three kube-reclaim roles as real processes against
// a test/cluster control plane, configured the way deploy/ configures them
// (the same arguments, the same policy file, the same webhook and scheduler
// configuration), with only what is specific to a machine replaced:
// addresses, the kubeconfig and the serving certificate. The demo, the
// end-to-end tests and the benchmarks use it.
package stack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-reclaim/kube-reclaim/deploy"
	"github.com/kube-reclaim/kube-reclaim/extender"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/webhook"
)

// Roles, as subcommands and process names.
const (
	Publisher = "publisher"
	Webhook   = "webhook"
	Extender  = "extender"
)

// Deployed is what deploy/ configures: each role's arguments (without the
// subcommand and without machine-specific flags) and environment (NAME=value,
// the variables given by value), the policy file and the webhook
// configuration's name.
type Deployed struct {
	Args              map[string][]string
	Env               map[string][]string
	Policy            string
	WebhookConfigName string
}

// machineFlags are replaced by Start with local values.
var machineFlags = []string{"--kubeconfig", "--health-address", "--metrics-address", "--listen-address", "--tls-cert-file",
	"--tls-private-key-file", "--self-signed", "--webhook-configuration-name", "--service-name",
	"--service-namespace", "--extra-sans", "--config", "--log-format"}

// LoadDeployed renders the deploy/ overlay (for example "default").
func LoadDeployed(overlay string) (*Deployed, error) {
	objs, err := deploy.Objects(overlay)
	if err != nil {
		return nil, err
	}
	d := &Deployed{Args: map[string][]string{}, Env: map[string][]string{}}
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment":
			var dep appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &dep); err != nil {
				return nil, err
			}
			for _, c := range dep.Spec.Template.Spec.Containers {
				// The extender is a sidecar of kube-reclaim-scheduler: the
				// container, named after its role, says which role it runs.
				if role := c.Name; len(c.Args) > 0 && c.Args[0] == role {
					d.Args[role] = localArgs(c.Args[1:])
					for _, e := range c.Env {
						if e.ValueFrom == nil {
							d.Env[role] = append(d.Env[role], e.Name+"="+e.Value)
						}
					}
				}
			}
		case "ConfigMap":
			if u.GetName() == "kube-reclaim-policy" {
				var cm corev1.ConfigMap
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cm); err != nil {
					return nil, err
				}
				d.Policy = cm.Data["policy.yaml"]
			}
		case "MutatingWebhookConfiguration":
			d.WebhookConfigName = u.GetName()
		}
	}
	for _, r := range []string{Publisher, Webhook, Extender} {
		if _, ok := d.Args[r]; !ok {
			return nil, fmt.Errorf("deploy/%s has no %s Deployment", overlay, r)
		}
	}
	if d.Policy == "" || d.WebhookConfigName == "" {
		return nil, fmt.Errorf("deploy/%s lacks the policy ConfigMap or the webhook configuration", overlay)
	}
	return d, nil
}

func localArgs(args []string) []string {
	var out []string
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		drop := false
		for _, f := range machineFlags {
			drop = drop || name == f
		}
		if !drop {
			out = append(out, a)
		}
	}
	return out
}

// BuildBinary builds cmd/kube-reclaim into dir.
func BuildBinary(ctx context.Context, dir string) (string, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "kube-reclaim")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/kube-reclaim")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/kube-reclaim: %w\n%s", err, out)
	}
	return bin, nil
}

// Ports are the loopback ports of one stack, chosen before the cluster
// starts because the scheduler's configuration names the extender.
type Ports struct {
	Webhook, Extender                                 int
	PublisherHealth, WebhookHealth, ExtenderHealth    int
	PublisherMetrics, WebhookMetrics, ExtenderMetrics int
}

// NewPorts picks free ports.
func NewPorts() (Ports, error) {
	var p Ports
	for _, f := range []*int{&p.Webhook, &p.Extender, &p.PublisherHealth, &p.WebhookHealth, &p.ExtenderHealth,
		&p.PublisherMetrics, &p.WebhookMetrics, &p.ExtenderMetrics} {
		var err error
		if *f, err = cluster.FreePort(); err != nil {
			return p, err
		}
	}
	return p, nil
}

// SchedulerConfig is the profiles and extenders sections for
// cluster.Options.SchedulerConfig. Every pod of a stack takes
// default-scheduler, so that profile gets the shipped reclaimed profile's
// settings: it scores the reclaimed resources, as the kube-reclaim-scheduler
// profile does in deploy/scheduler (regular pods, which ask none, are then
// scored by kube-scheduler's other plugins only).
func (p Ports) SchedulerConfig() (string, error) {
	prof, err := extender.ReclaimedProfile(corev1.DefaultSchedulerName, reclaimable.DefaultDomain, extender.StrategySpread)
	if err != nil {
		return "", err
	}
	profiles, err := extender.ProfilesYAML(prof)
	if err != nil {
		return "", err
	}
	ext, err := extender.ExtenderConfigYAML(fmt.Sprintf("http://127.0.0.1:%d", p.Extender), reclaimable.DefaultDomain)
	return profiles + ext, err
}

// Options tune a stack; the zero value runs deploy/default as deployed.
type Options struct {
	Overlay string // default "default"
	// Extra arguments appended per role (they win over deployed ones).
	Extra map[string][]string
	// Policy replaces the deployed policy file when set.
	Policy string
}

// Stack is a running set of roles.
type Stack struct {
	c        *cluster.Cluster
	Bin      string
	Dir      string
	Ports    Ports
	Deployed *Deployed
	args     map[string][]string
	// PolicyFile is the publisher's and the webhook's --config (as in
	// deploy/); rewrite it to reload.
	PolicyFile string
}

// Start starts publisher, webhook and extender under c and registers the
// webhook. bin is a kube-reclaim binary (BuildBinary).
func Start(ctx context.Context, c *cluster.Cluster, bin string, ports Ports, opts Options) (*Stack, error) {
	if opts.Overlay == "" {
		opts.Overlay = "default"
	}
	dep, err := LoadDeployed(opts.Overlay)
	if err != nil {
		return nil, err
	}
	s := &Stack{c: c, Bin: bin, Dir: filepath.Join(c.Dir(), "stack"), Ports: ports, Deployed: dep, args: map[string][]string{}}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, err
	}
	policy := dep.Policy
	if opts.Policy != "" {
		policy = opts.Policy
	}
	s.PolicyFile = filepath.Join(s.Dir, "policy.yaml")
	if err := os.WriteFile(s.PolicyFile, []byte(policy), 0o644); err != nil {
		return nil, err
	}
	kp, err := c.CA().ServingCert("kube-reclaim-webhook")
	if err != nil {
		return nil, err
	}
	certFile, keyFile, err := kp.Write(s.Dir, "webhook")
	if err != nil {
		return nil, err
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-reclaim"}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		return nil, err
	}
	local := map[string][]string{
		Publisher: {fmt.Sprintf("--health-address=127.0.0.1:%d", ports.PublisherHealth), "--config=" + s.PolicyFile},
		Webhook: {fmt.Sprintf("--health-address=127.0.0.1:%d", ports.WebhookHealth), fmt.Sprintf("--listen-address=127.0.0.1:%d", ports.Webhook),
			"--tls-cert-file=" + certFile, "--tls-private-key-file=" + keyFile, "--config=" + s.PolicyFile},
		// Stack pods take default-scheduler (SchedulerConfig); the flag
		// repeats, so the deployed kube-reclaim-scheduler stays as well.
		Extender: {fmt.Sprintf("--health-address=127.0.0.1:%d", ports.ExtenderHealth), fmt.Sprintf("--listen-address=127.0.0.1:%d", ports.Extender),
			"--scheduler-name=" + corev1.DefaultSchedulerName},
	}
	for _, r := range []string{Publisher, Webhook, Extender} {
		RegisterMetrics(s.HealthPort(r), MetricsEndpoint{Port: s.MetricsPort(r), Token: AdminToken(c)})
		local[r] = append(local[r], fmt.Sprintf("--metrics-address=127.0.0.1:%d", s.MetricsPort(r)))
	}
	for _, r := range []string{Publisher, Webhook, Extender} {
		args := append([]string{r, "--kubeconfig=" + c.Kubeconfig()}, dep.Args[r]...)
		args = append(append(args, local[r]...), opts.Extra[r]...)
		s.args[r] = args
		if err := s.StartRole(ctx, r); err != nil {
			return nil, err
		}
	}
	// Both webhooks of the shipped configuration: node status, and pods
	// asking for reclaimed resources (their limits enforced, or refused
	// while the webhook is down).
	cfg := webhook.MutatingWebhookConfiguration(dep.WebhookConfigName,
		webhook.URLClientConfig(fmt.Sprintf("https://127.0.0.1:%d%s", ports.Webhook, webhook.Path), c.CA().CertPEM))
	if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	return s, nil
}

// Args returns the full command line of a role (for printing).
func (s *Stack) Args(role string) []string { return s.args[role] }

// StartRole (re)starts a role with its arguments and waits for /readyz.
func (s *Stack) StartRole(ctx context.Context, role string) error {
	if p := s.c.Process(role); p != nil && p.Running() {
		return nil
	}
	if p := s.c.Process(role); p != nil {
		if err := s.c.StartComponent(role); err != nil {
			return err
		}
	} else if err := s.c.StartProcessWithEnv(role, s.Bin, s.Deployed.Env[role], s.args[role]...); err != nil {
		return err
	}
	return s.WaitReady(ctx, role, 90*time.Second)
}

// MetricsPort returns the role's /metrics port (see GetMetrics).
func (s *Stack) MetricsPort(role string) int {
	switch role {
	case Publisher:
		return s.Ports.PublisherMetrics
	case Webhook:
		return s.Ports.WebhookMetrics
	}
	return s.Ports.ExtenderMetrics
}

// HealthPort returns the role's /healthz, /readyz port; MetricsOf finds its
// metrics from it.
func (s *Stack) HealthPort(role string) int {
	switch role {
	case Publisher:
		return s.Ports.PublisherHealth
	case Webhook:
		return s.Ports.WebhookHealth
	}
	return s.Ports.ExtenderHealth
}

// WaitReady waits for the role's /readyz.
func (s *Stack) WaitReady(ctx context.Context, role string, timeout time.Duration) error {
	return WaitReadyz(ctx, s.c, role, s.HealthPort(role), timeout)
}

// WaitReadyz waits until the process name of c answers /readyz on
// 127.0.0.1:port; it gives up at once, with the tail of its log, when the
// process exits.
func WaitReadyz(ctx context.Context, c *cluster.Cluster, name string, port int, timeout time.Duration) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	var exited error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if p := c.Process(name); p == nil || !p.Running() {
			exited = fmt.Errorf("%s exited:\n%s", name, tail(p))
			return false, exited
		}
		ok, _ := httpOK(ctx, url)
		return ok, nil
	})
	switch {
	case exited != nil:
		return exited
	case err != nil:
		return fmt.Errorf("%s not ready within %s: %w\n%s", name, timeout, err, tail(c.Process(name)))
	}
	return nil
}

func tail(p *cluster.Process) string {
	if p == nil {
		return ""
	}
	return p.Tail(3000)
}
