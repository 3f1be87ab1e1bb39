package kubectlreclaim

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-reclaim/kube-reclaim/deploy"
)

// CheckStatus is the verdict of one doctor check.
type CheckStatus string

// The verdicts: a failure is something kube-reclaim cannot work (or cannot
// protect the cluster) without; a warning works today but needs a look.
const (
	CheckOK   CheckStatus = "ok"
	CheckWarn CheckStatus = "warn"
	CheckFail CheckStatus = "fail"
)

// DoctorCheck is one thing kubectl reclaim doctor looked at.
type DoctorCheck struct {
	// Name says what was checked, e.g. admission-policy/NAME or publisher-lease.
	Name   string      `json:"name"`
	Status CheckStatus `json:"status"`
	// Message says what was found and, unless ok, what to fix.
	Message string `json:"message"`
}

// DoctorReport is what kubectl reclaim doctor found.
type DoctorReport struct {
	metav1.TypeMeta `json:",inline"`
	// Overlay is the deploy/ overlay the install was compared with.
	Overlay   string        `json:"overlay"`
	Namespace string        `json:"namespace"`
	Checks    []DoctorCheck `json:"checks"`
	Failed    int           `json:"failed"`
	Warnings  int           `json:"warnings"`
}

// DeepCopyObject implements runtime.Object.
func (r *DoctorReport) DeepCopyObject() runtime.Object {
	if r == nil {
		return nil
	}
	c := *r
	c.Checks = slices.Clone(r.Checks)
	return &c
}

// doctorFlags are the flags of kubectl reclaim doctor.
type doctorFlags struct {
	stalenessFlags
	Overlay string
	output  *outputFlags
}

var doctorColumns = []metav1.TableColumnDefinition{
	{Name: "Check", Type: "string", Format: "name", Description: "What was checked."},
	{Name: "Status", Type: "string", Description: "ok, warn or fail."},
	{Name: "Message", Type: "string", Description: "What was found and, unless ok, what to fix."},
}

func newDoctorCommand(o *Options) *cobra.Command {
	d := &doctorFlags{stalenessFlags: defaultStaleness(), Overlay: deploy.Overlays[0], output: newOutputFlags(true)}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check an install of kube-reclaim and say what to fix",
		Long: `kubectl reclaim doctor checks, read-only, what kube-reclaim needs to work and to
protect the cluster, and says for each check what to fix:

  kubernetes-version       the cluster is at least the release the manifests need
  admission-policy/NAME    each ValidatingAdmissionPolicy of the manifests and its binding exist,
                           deny, and name this install's keys and ServiceAccounts
  webhook/NAME             the webhook configuration, its webhooks and a caBundle that is a valid,
                           unexpired CA and verifies the webhook's certificate when its Secret is readable
  service/NAME             the webhook Service has ready endpoints
  deployment/NAME          each role's Deployment (daemonset/NAME: DaemonSet) has available replicas;
                           kube-reclaim-scheduler's includes the extender
  publisher-lease          the publisher holds its leader Lease and renews it
  metrics-server           the metrics.k8s.io APIService is Available and lists node metrics
  node-annotations         nodes carry a fresh reclaimable annotation

What is expected comes from the manifests of this release (--overlay, the one
installed), with the install's namespace (-n, default the manifests') and
--resource-domain in place of the defaults. The exit code is 1 when any check
fails. Run it after an install and before filing a bug (attach -o yaml).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			errs := o.validateCommon()
			errs = append(errs, d.validate()...)
			if !slices.Contains(deploy.Overlays, d.Overlay) {
				errs = append(errs, fmt.Errorf("--overlay: %q is not one of %v", d.Overlay, deploy.Overlays))
			}
			if err := d.output.validate(); err != nil {
				errs = append(errs, err)
			}
			if err := errors.Join(errs...); err != nil {
				return err
			}
			namespace := ""
			if o.ConfigFlags.Namespace != nil {
				namespace = *o.ConfigFlags.Namespace
			}
			names, _ := o.names()
			m, err := loadManifests(d.Overlay, namespace, names)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("publisher-lease-namespace") {
				d.PublisherLeaseNamespace = m.namespace
			}
			c, err := o.clients()
			if err != nil {
				return err
			}
			r := doctor(cmd.Context(), c, m, &d.stalenessFlags, o)
			if err := cmd.Context().Err(); err != nil {
				return err
			}
			if err := printDoctor(o, d, r); err != nil {
				return err
			}
			if r.Failed > 0 {
				return fmt.Errorf("%d of %d checks failed", r.Failed, len(r.Checks))
			}
			return nil
		},
	}
	fs := cmd.Flags()
	d.addFlags(fs)
	fs.StringVar(&d.Overlay, "overlay", d.Overlay, fmt.Sprintf("The deploy/ overlay installed, one of %v: what is expected.", deploy.Overlays))
	d.output.addFlags(cmd)
	return cmd
}

// doctor runs every check. A check that cannot read something says so in
// its own row; the others still run.
func doctor(ctx context.Context, c Clients, m *installManifests, f *stalenessFlags, o *Options) *DoctorReport {
	r := &DoctorReport{TypeMeta: typeMeta("DoctorReport"), Overlay: m.overlay, Namespace: m.namespace}
	now := o.Now()
	r.Checks = append(r.Checks, checkVersion(c))
	r.Checks = append(r.Checks, checkAdmissionPolicies(ctx, c, m)...)
	r.Checks = append(r.Checks, checkWebhooks(ctx, c, m, now)...)
	r.Checks = append(r.Checks, checkServices(ctx, c, m)...)
	r.Checks = append(r.Checks, checkWorkloads(ctx, c, m)...)
	lease, leaseCheck := checkLease(ctx, c, f, now)
	r.Checks = append(r.Checks, leaseCheck)
	r.Checks = append(r.Checks, checkMetrics(ctx, c))
	r.Checks = append(r.Checks, checkNodeAnnotations(ctx, c, m, f, lease, now))
	for _, ch := range r.Checks {
		switch ch.Status {
		case CheckFail:
			r.Failed++
		case CheckWarn:
			r.Warnings++
		}
	}
	return r
}

func printDoctor(o *Options, d *doctorFlags, r *DoctorReport) error {
	if d.output.machineReadable() {
		return d.output.printDocument(o.Streams.Out, r)
	}
	t := &metav1.Table{ColumnDefinitions: doctorColumns, Rows: make([]metav1.TableRow, 0, len(r.Checks))}
	for _, ch := range r.Checks {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{ch.Name, string(ch.Status), ch.Message}, Object: rowObject("Check", "", ch.Name)})
	}
	return d.output.printTable(o.Streams.Out, t, false)
}
