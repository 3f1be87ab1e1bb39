package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kube-reclaim/kube-reclaim/deploy"
	"github.com/kube-reclaim/kube-reclaim/internal/ociimage"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/test/promserver"
)

// The install the Prometheus test scrapes: kube-reclaim's image under a
// tag of the test's (framework.BuildInstallImages).
const (
	promImageTag  = "prometheus-test"
	promNamespace = "kube-reclaim"
	promPolicyMap = "kube-reclaim-policy"
	// The test's scrape and evaluation intervals replace the PodMonitors'
	// and the rule groups' (30s). Rules are evaluated more often than
	// targets are scraped, so that an alert fires within its for plus one
	// scrape interval for the sample and under one for the rule to see it.
	promScrapeInterval = 5 * time.Second
	promEvalInterval   = 2500 * time.Millisecond
	// A pod gone is noticed when service discovery's findings are next
	// applied (Prometheus's default: every 5s, a sixth of the 30s the
	// PodMonitors scrape at); here every second, the same small share of
	// the test's scrape interval.
	promDiscoveryReload = time.Second
	// promControlAlert is the positive control's alert: always true.
	promControlAlert = "PrometheusTestPositiveControl"
)

// The alerts each fault must fire: a contract with the rule set of
// deploy/components/monitoring.
const (
	alertPlacementDown      = "KubeReclaimPlacementDown"
	alertPublisherDown      = "KubeReclaimPublisherDown"
	alertPolicyReloadFailed = "KubeReclaimPolicyReloadFailed"
)

// TestPrometheusAlertsOnARealInstall runs a real Prometheus, the version
// promtool checks the rules with, against kube-reclaim installed from the
// shipped overlay and monitoring component onto a real node: it scrapes
// every role the way the shipped PodMonitors tell the Prometheus operator
// to (translated by code from the rendered objects: pod discovery, the same
// TLS settings and credentials) and evaluates the shipped PrometheusRule.
// Every recording rule returns a series; a healthy install has no alert
// pending or firing while a broken rule fires; deleting the scheduler,
// refusing a policy reload and stopping the publisher each fire their alert
// within its for plus two scrape intervals (plus, for pods gone, the delay
// before Prometheus marks their series stale).
func TestPrometheusAlertsOnARealInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: the Prometheus test takes minutes")
	}
	if os.Geteuid() != 0 {
		t.Skip("real nodes need root (kubelet manages cgroups and mounts, the node needs a network namespace)")
	}
	ctx := context.Background()
	testStart := time.Now()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := cluster.EnsureKubectl(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	bins, err := cluster.EnsureBinaries(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	promBin, err := cluster.EnsurePrometheus(ctx, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()

	start := time.Now()
	_, tarballs, err := framework.BuildInstallImages(ctx, root, filepath.Join(work, "image"), promImageTag, nil, bins)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("images built in %s", time.Since(start).Round(time.Millisecond))

	c := cluster.StartForTest(t, cluster.Options{NoMetricsServer: true, EndpointRouting: true})
	start = time.Now()
	// Kubelet posts its status every 15 s, so that node reviews reach the
	// webhook steadily.
	rn, err := c.AddRealNode(ctx, "prom-a", cluster.RealNodeSpec{NetworkNamespace: true, StatusReportFrequency: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := rn.ImportImages(ctx, tarballs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s Ready, images imported, in %s", rn.Name, time.Since(start).Round(time.Millisecond))
	apply := func(name string, data []byte) {
		t.Helper()
		file := filepath.Join(work, name)
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", c.Kubeconfig(), "apply", "-f", file).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s", name, err, out)
		}
	}

	// metrics-server first, as deploy/README.md asks (the install test's
	// manifest).
	ms, err := framework.MetricsServerManifest(root)
	if err != nil {
		t.Fatal(err)
	}
	apply("metrics-server.yaml", ms)

	// The shipped overlay and monitoring component, in a kustomization of
	// one's own as deploy/README.md describes, rendered by kustomize. The
	// PodMonitors and the PrometheusRule are for a Prometheus operator,
	// which this cluster does not run: the test translates them itself.
	objs, err := deploy.ObjectsWith("prometheus-test", map[string]string{"prometheus-test/kustomization.yaml": fmt.Sprintf(
		"resources: [../default]\ncomponents: [../components/monitoring]\nimages:\n  - name: %s\n    newName: %s\n    newTag: %s\n",
		ociimage.DefaultRepository, framework.InstallImageRepo, promImageTag)})
	if err != nil {
		t.Fatal(err)
	}
	var monitors, certificates []*unstructured.Unstructured
	var promRule *unstructured.Unstructured
	var namespaces, manifest []string
	for _, o := range objs {
		if strings.HasPrefix(o.GetAPIVersion(), "cert-manager.io/") {
			// No cert-manager here: the test issues what it would.
			if o.GetKind() == "Certificate" {
				certificates = append(certificates, o)
			}
			continue
		}
		switch o.GetKind() {
		case "PodMonitor":
			monitors = append(monitors, o)
			continue
		case "PrometheusRule":
			promRule = o
			continue
		case "ConfigMap":
			if o.GetName() == promPolicyMap {
				usePolicy(t, o, "request")
			}
		}
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		if o.GetKind() == "Namespace" {
			namespaces = append(namespaces, string(y))
		} else {
			manifest = append(manifest, string(y))
		}
	}
	if len(monitors) == 0 || promRule == nil {
		t.Fatalf("the monitoring component renders %d PodMonitors and PrometheusRule %v", len(monitors), promRule != nil)
	}
	if len(namespaces) > 0 {
		apply("namespaces.yaml", []byte(strings.Join(namespaces, "---\n")))
	}
	issueCertificates(t, c, certificates)
	applied := time.Now()
	apply("kube-reclaim.yaml", []byte(strings.Join(manifest, "---\n")))
	waitInstalled(t, c, applied)

	// A batch pod opted in by its label: the webhook rewrites it, the
	// extender places it, and it holds part of the room.
	batch := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "batch", Labels: map[string]string{names.ReclaimedLabel: "true"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(bool), TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "main", Image: cluster.WorkloadImage, ImagePullPolicy: corev1.PullNever,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}},
		},
	}
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, batch, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if took, ok := framework.Poll(2*time.Minute, 250*time.Millisecond, func() bool {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "batch", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning && p.Spec.SchedulerName != corev1.DefaultSchedulerName
	}); !ok {
		t.Fatalf("the batch pod is not Running through kube-reclaim's scheduler after %s", took)
	} else {
		t.Logf("batch pod Running %s after it was created", took.Round(time.Millisecond))
	}

	// Prometheus, configured from the rendered objects.
	promDir := filepath.Join(work, "prometheus")
	if err := os.MkdirAll(promDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var tr *promserver.Translation
	var trErr error
	classes := scrapeClasses(t, c, objs, monitors, filepath.Join(promDir, "secrets"))
	// The token controller fills a legacy token Secret asynchronously.
	if took, ok := framework.Poll(time.Minute, time.Second, func() bool {
		tr, trErr = promserver.Translate(monitors, clusterResolver{c.Client}, promserver.TranslateOptions{Kubeconfig: c.Kubeconfig(),
			Dir: filepath.Join(promDir, "secrets"), Interval: promScrapeInterval.String(), ScrapeClasses: classes})
		return trErr == nil
	}); !ok {
		t.Fatalf("the PodMonitors do not translate after %s: %v", took, trErr)
	}
	rulesFile, rules, err := promserver.RuleFile(promRule, model.Duration(promEvalInterval).String())
	if err != nil {
		t.Fatal(err)
	}
	control := fmt.Sprintf("groups:\n  - name: positive-control\n    rules:\n      - alert: %s\n        expr: vector(1) > 0\n", promControlAlert)
	prom, err := promserver.Start(ctx, c, promBin, promDir, promserver.Config{
		ScrapeInterval: promScrapeInterval.String(), EvaluationInterval: model.Duration(promEvalInterval).String(),
		DiscoveryReloadInterval: promDiscoveryReload.String(),
		ScrapeConfigs:           tr.ScrapeConfigs,
		RuleFiles:               map[string][]byte{"kube-reclaim.rules.yaml": rulesFile, "control.rules.yaml": []byte(control)},
		Files:                   tr.Files,
	})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []string
	for _, sc := range tr.ScrapeConfigs {
		jobs = append(jobs, fmt.Sprintf("%s (%s, tls %+v, authorization %+v)", sc.JobName, sc.Scheme, sc.TLSConfig, sc.Authorization))
	}
	t.Logf("Prometheus at %s: scrape every %s, evaluate every %s, %d rules; jobs: %s", prom.URL, promScrapeInterval, promEvalInterval,
		len(rules), strings.Join(jobs, "; "))

	t.Run("every role's pods are scraped with the PodMonitors' TLS and credentials", func(t *testing.T) {
		testPromTargets(t, prom, len(tr.ScrapeConfigs))
	})
	t.Run("every recording rule returns a series", func(t *testing.T) {
		testPromRecordingRules(t, prom, rules)
	})
	t.Run("healthy: no alert pending or firing over 24 evaluations while a broken rule fires at every look", func(t *testing.T) {
		testPromHealthy(t, prom)
	})
	t.Run("scheduler deleted, policy reload refused, publisher stopped: each fires its alert within its for plus two scrape intervals and the staleness delay of pods gone", func(t *testing.T) {
		testPromFaults(t, c, prom, rules)
	})
	t.Logf("TestPrometheusAlertsOnARealInstall took %s", time.Since(testStart).Round(time.Second))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// usePolicy sets the policy of the default block of the rendered policy
// ConfigMap. Under the shipped usage policy the room of a node is what this
// shared machine leaves idle, often nothing, and the recording rules that
// divide by the room would have nothing to show; the request policy does
// not depend on the machine's load.
func usePolicy(t *testing.T, cm *unstructured.Unstructured, policy string) {
	t.Helper()
	data, _, _ := unstructured.NestedString(cm.Object, "data", "policy.yaml")
	const from = "\n  policy: usage "
	if !strings.Contains(data, from) {
		t.Fatalf("the shipped policy has no %q line:\n%s", strings.TrimSpace(from), data)
	}
	if err := unstructured.SetNestedField(cm.Object, strings.Replace(data, from, "\n  policy: "+policy+" ", 1), "data", "policy.yaml"); err != nil {
		t.Fatal(err)
	}
}

// waitInstalled waits until every Deployment of the install is Available
// and the publisher has published the node.
func waitInstalled(t *testing.T, c *cluster.Cluster, applied time.Time) {
	t.Helper()
	ctx := context.Background()
	var summary []string
	took, ok := framework.Poll(3*time.Minute, 500*time.Millisecond, func() bool {
		summary = summary[:0]
		l, err := c.Client.AppsV1().Deployments(promNamespace).List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) == 0 {
			return false
		}
		all := true
		for _, d := range l.Items {
			summary = append(summary, fmt.Sprintf("%s %d/%d", d.Name, d.Status.AvailableReplicas, d.Status.Replicas))
			all = all && framework.DeploymentAvailable(&d)
		}
		return all
	})
	if !ok {
		t.Fatalf("Deployments not all Available after %s: %v", took, summary)
	}
	t.Logf("every Deployment Available %s after apply: %s", time.Since(applied).Round(time.Millisecond), strings.Join(summary, ", "))
	took, ok = framework.Poll(3*time.Minute, time.Second, func() bool {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "prom-a", metav1.GetOptions{})
		if err != nil {
			return false
		}
		q := n.Status.Allocatable[names.CPU]
		return n.Annotations[names.Annotation] != "" && q.Value() >= 100
	})
	if !ok {
		t.Fatalf("node not published with %s >= 100 after %s", names.CPU, took)
	}
	t.Logf("node published under the request policy %s after apply", time.Since(applied).Round(time.Millisecond))
}

// issueCertificates does what cert-manager would for each Certificate
// (deploy/README.md, "Without cert-manager"): a Secret of its secretName
// with a certificate for its names (tls.crt, tls.key) and the CA that
// signed it (ca.crt). A CA Certificate's own Secret is left out: only the
// issuer it backs reads it.
func issueCertificates(t *testing.T, c *cluster.Cluster, certs []*unstructured.Unstructured) {
	t.Helper()
	var ca *cluster.CA
	for _, cert := range certs {
		if isCA, _, _ := unstructured.NestedBool(cert.Object, "spec", "isCA"); isCA {
			continue
		}
		secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		commonName, _, _ := unstructured.NestedString(cert.Object, "spec", "commonName")
		dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		if ca == nil {
			var err error
			if ca, err = cluster.NewCA("prometheus-test-metrics-ca"); err != nil {
				t.Fatal(err)
			}
		}
		kp, err := ca.Issue(cluster.CertSpec{CommonName: commonName, Hosts: dnsNames, Server: true})
		if err != nil {
			t.Fatal(err)
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cert.GetNamespace(), Name: secretName}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: kp.CertPEM, corev1.TLSPrivateKeyKey: kp.KeyPEM, "ca.crt": ca.CertPEM}}
		if _, err := c.Client.CoreV1().Secrets(s.Namespace).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Logf("no cert-manager here: Secret %s/%s issued for %v, as Certificate %s asks", s.Namespace, s.Name, dnsNames, cert.GetName())
	}
}

// scrapeClasses defines every scrape class the monitors name, as whoever
// runs Prometheus does (deploy/README.md, Monitoring): Bearer, with a
// token of the ServiceAccount the monitoring component binds to the
// metrics reader role, issued for the audiences the roles require
// (--metrics-token-audiences). A real Prometheus reads it from a projected
// volume; this one from the file the test writes.
func scrapeClasses(t *testing.T, c *cluster.Cluster, objs, monitors []*unstructured.Unstructured, dir string) map[string]promserver.ScrapeClass {
	t.Helper()
	ctx := context.Background()
	var classNames []string
	for _, m := range monitors {
		if name, _, _ := unstructured.NestedString(m.Object, "spec", "scrapeClass"); name != "" && !slices.Contains(classNames, name) {
			classNames = append(classNames, name)
		}
	}
	if len(classNames) == 0 {
		return nil
	}
	var account *rbacv1.Subject
	var audiences []string
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
				t.Fatal(err)
			}
			if b.RoleRef.Name == "kube-reclaim-metrics-reader" && b.Labels["app.kubernetes.io/component"] == "monitoring" &&
				len(b.Subjects) > 0 && b.Subjects[0].Kind == rbacv1.ServiceAccountKind {
				account = &b.Subjects[0]
			}
		case "Deployment", "DaemonSet":
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, ct := range containers {
				args, _, _ := unstructured.NestedStringSlice(ct.(map[string]any), "args")
				for _, a := range args {
					if v, ok := strings.CutPrefix(a, "--metrics-token-audiences="); ok {
						for _, aud := range strings.Split(v, ",") {
							if !slices.Contains(audiences, aud) {
								audiences = append(audiences, aud)
							}
						}
					}
				}
			}
		}
	}
	if account == nil {
		t.Fatalf("the monitors name scrape classes %v, but no ClusterRoleBinding of the monitoring component binds a ServiceAccount to kube-reclaim-metrics-reader", classNames)
	}
	// Your Prometheus' ServiceAccount: the test makes it when the install
	// does not.
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: account.Namespace}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().ServiceAccounts(account.Namespace).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: account.Namespace, Name: account.Name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	expiry := int64(3600)
	tok, err := c.Client.CoreV1().ServiceAccounts(account.Namespace).CreateToken(ctx, account.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "scrape-class-token")
	if err := os.WriteFile(file, []byte(tok.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	classes := map[string]promserver.ScrapeClass{}
	for _, n := range classNames {
		classes[n] = promserver.ScrapeClass{Authorization: &promserver.Authorization{Type: "Bearer", CredentialsFile: file}}
	}
	t.Logf("scrape classes %v: Bearer, a token of ServiceAccount %s/%s for the audiences %v", classNames, account.Namespace, account.Name, audiences)
	return classes
}

// clusterResolver reads what the PodMonitors reference from the cluster.
type clusterResolver struct{ client kubernetes.Interface }

func (r clusterResolver) Secret(ns, name, key string) ([]byte, error) {
	s, err := r.client.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return s.Data[key], nil
}

func (r clusterResolver) ConfigMap(ns, name, key string) ([]byte, error) {
	cm, err := r.client.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if v, ok := cm.Data[key]; ok {
		return []byte(v), nil
	}
	return cm.BinaryData[key], nil
}

// testPromTargets waits until every scrape job has targets and every target
// is up: the roles accepted the credentials, and their certificates passed
// the PodMonitors' TLS settings.
func testPromTargets(t *testing.T, prom *promserver.Server, jobs int) {
	ctx := context.Background()
	var last []promv1.ActiveTarget
	took, ok := framework.Poll(2*time.Minute, time.Second, func() bool {
		r, err := prom.API.Targets(ctx)
		if err != nil {
			return false
		}
		last = r.Active
		perJob := map[string]int{}
		for _, tg := range r.Active {
			if tg.Health != promv1.HealthGood {
				return false
			}
			perJob[tg.ScrapePool]++
		}
		return len(perJob) == jobs
	})
	var lines []string
	for _, tg := range last {
		lines = append(lines, fmt.Sprintf("%s %s pod %s: %s %s", tg.Labels["job"], tg.ScrapeURL, tg.Labels["pod"], tg.Health, tg.LastError))
	}
	sort.Strings(lines)
	if !ok {
		t.Fatalf("targets not all up in %d jobs after %s:\n%s", jobs, took, strings.Join(lines, "\n"))
	}
	t.Logf("%d targets up %s after Prometheus started:\n%s", len(last), took.Round(time.Millisecond), strings.Join(lines, "\n"))
}

// testPromRecordingRules queries every recording rule's name until each
// returns a series.
func testPromRecordingRules(t *testing.T, prom *promserver.Server, rules []promserver.Rule) {
	ctx := context.Background()
	pending := map[string]bool{}
	for _, r := range rules {
		if r.Record != "" {
			pending[r.Record] = true
		}
	}
	if len(pending) == 0 {
		t.Fatal("the PrometheusRule has no recording rule")
	}
	total := len(pending)
	start := time.Now()
	var found []string
	framework.Poll(2*time.Minute, promEvalInterval, func() bool {
		for name := range pending {
			v, _, _, err := prom.API.Query(ctx, name, time.Now())
			if vec, ok := v.(model.Vector); err == nil && ok && len(vec) > 0 {
				delete(pending, name)
				found = append(found, fmt.Sprintf("%s (%d series, %s) after %s", name, len(vec), vec[0].Value, time.Since(start).Round(time.Second)))
			}
		}
		return len(pending) == 0
	})
	sort.Strings(found)
	t.Logf("%d of %d recording rules return a series:\n%s", len(found), total, strings.Join(found, "\n"))
	for name := range pending {
		t.Errorf("recording rule %s returns no series after %s", name, time.Since(start).Round(time.Second))
	}
}

// activeAlerts are the alerts Prometheus holds pending or firing.
func activeAlerts(ctx context.Context, prom *promserver.Server) ([]promv1.Alert, error) {
	r, err := prom.API.Alerts(ctx)
	if err != nil {
		return nil, err
	}
	return r.Alerts, nil
}

// testPromHealthy looks at Prometheus's alerts at every evaluation for 24
// evaluations: none of the shipped alerts may be pending (one evaluation
// from firing once its for has passed) or firing, and the positive
// control, a rule that is always true, must be firing at every look.
func testPromHealthy(t *testing.T, prom *promserver.Server) {
	ctx := context.Background()
	controlLooks, looks := 0, 0
	a := framework.Absence{Window: 24 * promEvalInterval, Every: promEvalInterval,
		Look: func(time.Duration) ([]string, bool) {
			alerts, err := activeAlerts(ctx, prom)
			if err != nil {
				return []string{"alerts API: " + err.Error()}, false
			}
			looks++
			var v []string
			control := false
			for _, al := range alerts {
				name := string(al.Labels[model.AlertNameLabel])
				if name == promControlAlert {
					if al.State == promv1.AlertStateFiring {
						control = true
						controlLooks++
					}
					continue
				}
				v = append(v, fmt.Sprintf("%s %s since %s (value %s, labels %v)", name, al.State, al.ActiveAt.Format(time.RFC3339), al.Value, al.Labels))
			}
			return v, control
		}}
	r := framework.ExpectAbsence(t, a)
	t.Logf("%d looks over %s (evaluation every %s): %d shipped alerts seen pending or firing; the control firing at %d looks",
		r.Looks, r.Observed.Round(100*time.Millisecond), promEvalInterval, len(r.Violations), controlLooks)
	if controlLooks != looks {
		t.Errorf("the control was firing at %d of %d looks", controlLooks, looks)
	}
}

// alertWatch records when each alert was first seen pending and firing,
// looking every 250 ms.
type alertWatch struct {
	mu              sync.Mutex
	pending, firing map[string]time.Time
	activeAt        map[string]time.Time
}

func watchAlerts(ctx context.Context, prom *promserver.Server) *alertWatch {
	w := &alertWatch{pending: map[string]time.Time{}, firing: map[string]time.Time{}, activeAt: map[string]time.Time{}}
	go func() {
		for ctx.Err() == nil {
			alerts, err := activeAlerts(ctx, prom)
			now := time.Now()
			if err == nil {
				w.mu.Lock()
				for _, al := range alerts {
					name := string(al.Labels[model.AlertNameLabel])
					if _, ok := w.pending[name]; !ok {
						w.pending[name], w.activeAt[name] = now, al.ActiveAt
					}
					if _, ok := w.firing[name]; !ok && al.State == promv1.AlertStateFiring {
						w.firing[name] = now
					}
				}
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *alertWatch) firedAt(name string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.firing[name]
	return at, ok
}

// promFault is one fault and the alert it must fire.
type promFault struct {
	alert          string
	rule           promserver.Rule
	action, effect time.Time // when the test acted, when the fault took effect
	what           string    // what took effect
	// vanishes: the fault removes the role's pods, so Prometheus stops
	// scraping them rather than failing a scrape (see bound).
	vanishes bool
}

// bound is how long after f took effect its alert must fire: its for plus
// two scrape intervals, one for the sample that shows the fault and one
// for the rule to see it. A role whose pods are gone is never scraped
// again: Prometheus applies the drop at its next discovery reload, then
// marks the target's series stale only after two scrape intervals and a
// tenth (it waits for the target to come back; scrape.go,
// endOfRunStaleness), and a rule sees that at its next evaluation.
func (f *promFault) bound() (time.Duration, string) {
	if !f.vanishes {
		return f.rule.For + 2*promScrapeInterval, fmt.Sprintf("for %s + 2 scrape intervals", f.rule.For)
	}
	return f.rule.For + 2*promScrapeInterval + promScrapeInterval/10 + promDiscoveryReload + promEvalInterval,
		fmt.Sprintf("for %s + discovery reload %s + 2.1 scrape intervals until stale + one evaluation %s", f.rule.For, promDiscoveryReload, promEvalInterval)
}

// testPromFaults injects the three faults and waits for their alerts: the
// scheduler's Deployment deleted, at the same time an invalid policy
// written into the policy ConfigMap, and once a role refused it and its
// alert fired, the publisher scaled to zero (a stopped publisher refuses
// nothing). Each alert must fire within
// its bound of the fault taking effect: the last pod of the role gone, or
// the first role's refusal of the new policy file.
func testPromFaults(t *testing.T, c *cluster.Cluster, prom *promserver.Server, rules []promserver.Rule) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	faults := map[string]*promFault{}
	for _, name := range []string{alertPlacementDown, alertPolicyReloadFailed, alertPublisherDown} {
		r, err := promserver.Alert(rules, name)
		if err != nil {
			t.Errorf("the shipped PrometheusRule has no alert %s: nothing to wait for on its fault", name)
			continue
		}
		faults[name] = &promFault{alert: name, rule: r, vanishes: name != alertPolicyReloadFailed}
	}
	if len(faults) == 0 {
		t.FailNow()
	}
	watch := watchAlerts(ctx, prom)
	faultsStart := time.Now()
	deps := c.Client.AppsV1().Deployments(promNamespace)
	podsGone := func(component string) (time.Time, error) {
		var err error
		if _, ok := framework.Poll(3*time.Minute, 250*time.Millisecond, func() bool {
			var l *corev1.PodList
			l, err = c.Client.CoreV1().Pods(promNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + component})
			return err == nil && len(l.Items) == 0
		}); !ok {
			if err != nil {
				return time.Time{}, fmt.Errorf("pods of %s still there after 3 minutes: %w", component, err)
			}
			return time.Time{}, fmt.Errorf("pods of %s still there after 3 minutes", component)
		}
		return time.Now(), nil
	}
	// waitFired waits for f's alert until a minute past its bound, so that
	// a late alert is reported with its delay.
	waitFired := func(f *promFault) {
		b, _ := f.bound()
		framework.Poll(time.Until(f.effect.Add(b+time.Minute)), 250*time.Millisecond, func() bool {
			_, ok := watch.firedAt(f.alert)
			return ok
		})
	}

	var wg sync.WaitGroup
	if f := faults[alertPlacementDown]; f != nil {
		wg.Go(func() {
			f.action = time.Now()
			policy := metav1.DeletePropagationBackground
			if err := deps.Delete(ctx, "kube-reclaim-scheduler", metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
				t.Errorf("deleting the scheduler Deployment: %v", err)
				return
			}
			var err error
			if f.effect, err = podsGone("scheduler"); err != nil {
				t.Error(err)
				return
			}
			f.what = "the last kube-reclaim-scheduler pod gone"
			waitFired(f)
		})
	}
	if f := faults[alertPolicyReloadFailed]; f != nil {
		f.action = time.Now()
		if err := refusePolicy(ctx, c); err != nil {
			t.Error(err)
		} else if at, pod, err := policyRefused(ctx, c, f.action); err != nil {
			t.Error(err)
		} else {
			f.effect, f.what = at, "the first refusal of the new policy file (pod "+pod+")"
			waitFired(f)
		}
	}
	if f := faults[alertPublisherDown]; f != nil {
		f.action = time.Now()
		patch := []byte(`{"spec":{"replicas":0}}`)
		if _, err := deps.Patch(ctx, "kube-reclaim-publisher", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Errorf("scaling the publisher to 0: %v", err)
		} else if at, err := podsGone("publisher"); err != nil {
			t.Error(err)
		} else {
			f.effect, f.what = at, "the last publisher pod gone"
			waitFired(f)
		}
	}
	wg.Wait()
	cancel()

	for _, name := range []string{alertPlacementDown, alertPolicyReloadFailed, alertPublisherDown} {
		f := faults[name]
		if f == nil || f.effect.IsZero() {
			continue
		}
		bound, why := f.bound()
		fired, ok := watch.firedAt(name)
		if !ok {
			t.Errorf("%s did not fire within %s of %s (%s after the test acted; bound: %s = %s)", name,
				bound+time.Minute, f.what, f.effect.Sub(f.action).Round(time.Millisecond), why, bound)
			continue
		}
		took := fired.Sub(f.effect)
		watch.mu.Lock()
		pendingAfter := watch.pending[name].Sub(f.effect)
		watch.mu.Unlock()
		t.Logf("%s fired %s after %s (%s after the test acted; pending after %s; bound: %s = %s)",
			name, took.Round(100*time.Millisecond), f.what, fired.Sub(f.action).Round(100*time.Millisecond), pendingAfter.Round(100*time.Millisecond),
			why, bound)
		if took > bound {
			t.Errorf("%s fired %s after %s, past its bound (%s = %s)", name, took.Round(100*time.Millisecond), f.what, why, bound)
		}
	}
	// Every alert that fired during the faults, with when.
	watch.mu.Lock()
	var all []string
	for name, at := range watch.firing {
		if name != promControlAlert {
			all = append(all, fmt.Sprintf("%s firing %s after the first fault (active since %s)", name,
				at.Sub(faultsStart).Round(100*time.Millisecond), watch.activeAt[name].Sub(faultsStart).Round(100*time.Millisecond)))
		}
	}
	watch.mu.Unlock()
	sort.Strings(all)
	t.Logf("alerts that fired during the faults:\n%s", strings.Join(all, "\n"))
}

// refusePolicy writes a policy the publisher must refuse (an unknown
// policy name) into the installed policy ConfigMap.
func refusePolicy(ctx context.Context, c *cluster.Cluster) error {
	cms := c.Client.CoreV1().ConfigMaps(promNamespace)
	cm, err := cms.Get(ctx, promPolicyMap, metav1.GetOptions{})
	if err != nil {
		return err
	}
	const from = "\n  policy: request "
	if !strings.Contains(cm.Data["policy.yaml"], from) {
		return fmt.Errorf("the installed policy has no %q line", strings.TrimSpace(from))
	}
	cm.Data["policy.yaml"] = strings.Replace(cm.Data["policy.yaml"], from, "\n  policy: no-such-policy ", 1)
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

// policyRefusal is the log line with which every role that reads the
// policy file (internal/policyfile) refuses a new version of it.
const policyRefusal = "rejected new policy file"

// policyRefused waits until a role that mounts the policy ConfigMap logs
// that it refused the new file, once kubelet has synced the edit into its
// volume (each pod on its own schedule), and returns when the test saw it
// (looking twice a second) and in which pod.
func policyRefused(ctx context.Context, c *cluster.Cluster, after time.Time) (time.Time, string, error) {
	var pod string
	var err error
	since := metav1.NewTime(after.Add(-time.Second))
	if _, ok := framework.Poll(3*time.Minute, 500*time.Millisecond, func() bool {
		var l *corev1.PodList
		if l, err = c.Client.CoreV1().Pods(promNamespace).List(ctx, metav1.ListOptions{}); err != nil {
			return false
		}
		for _, p := range l.Items {
			for _, v := range p.Spec.Volumes {
				if v.ConfigMap == nil || v.ConfigMap.Name != promPolicyMap {
					continue
				}
				for _, ct := range p.Spec.Containers {
					if !slices.ContainsFunc(ct.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == v.Name }) {
						continue
					}
					logs, lerr := c.Client.CoreV1().Pods(promNamespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ct.Name, SinceTime: &since}).DoRaw(ctx)
					if lerr == nil && strings.Contains(string(logs), policyRefusal) {
						pod = p.Name
						return true
					}
				}
			}
		}
		return false
	}); !ok {
		if err == nil {
			err = fmt.Errorf("no role logged %q within 3 minutes of the edit", policyRefusal)
		}
		return time.Time{}, "", err
	}
	return time.Now(), pod, nil
}
