package kubectlreclaim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// ExplainOptions are the flags of `kubectl reclaim explain NODE`.
type ExplainOptions struct {
	*Options
	freshnessFlags
	Node   string
	output *outputFlags
}

func newExplainCommand(o *Options) *cobra.Command {
	e := &ExplainOptions{Options: o, freshnessFlags: defaultFreshness(), output: newOutputFlags(false)}
	cmd := &cobra.Command{
		Use:   "explain NODE | pod/NAME",
		Short: "Every term of the policy formula behind a node's published values, or how kube-reclaim changed a pod",
		Long: `Explains a node's published reclaimed CPU and memory: every term the policy
applied, in order, with its value and the running result, in words; then checks
that the terms evaluate to the published value. When the values do not count
(stale annotation) or are zero on purpose (stale or missing metrics), says why
and what to check.

Fails when the node has no annotation or the annotation cannot be read, and
when the terms do not add up to the published value.

With pod/NAME (namespace from -n or the current context): the profile that
rewrote the pod and what it rewrote, its reclaimed request, whether kubelet
enforces the grant (native limits), and each container's resources.`,
		Example: `  kubectl reclaim explain node-1
  kubectl reclaim explain node-1 -o yaml
  kubectl reclaim explain pod/train-1 -n batch`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e.Node = args[0]
			if err := e.Validate(); err != nil {
				return err
			}
			if pod, ok := podArg(args[0]); ok {
				return e.explainPod(cmd.Context(), pod)
			}
			return e.Run(cmd.Context())
		},
	}
	e.output.addFlags(cmd)
	e.addFlags(cmd.Flags())
	return cmd
}

// Validate reports every invalid flag at once.
func (e *ExplainOptions) Validate() error {
	errs := e.validateCommon()
	if err := e.output.validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, e.validate()...)
	return errors.Join(errs...)
}

// ExplainReport is the json/yaml document of `kubectl reclaim explain`.
type ExplainReport struct {
	metav1.TypeMeta `json:",inline"`
	Node            string                `json:"node"`
	Time            time.Time             `json:"time"`
	Fresh           bool                  `json:"fresh"`
	StaleReason     string                `json:"staleReason,omitempty"`
	StaleDetail     string                `json:"staleDetail,omitempty"`
	Published       reclaimable.Resources `json:"published"`
	// Held is what the node's reclaimed pods held when the annotation was
	// written; Floor is max(Published, Held), the status value the webhook
	// writes and kubelet admits against.
	Held  reclaimable.Resources `json:"held"`
	Floor reclaimable.Resources `json:"floor"`
	// PublisherLease is the publisher's leader Lease, when checked.
	PublisherLease *LeaseReport            `json:"publisherLease,omitempty"`
	Annotation     *reclaimable.Annotation `json:"annotation"`
	// Evaluated is what the explanation's terms evaluate to.
	Evaluated *reclaimable.Resources `json:"evaluated,omitempty"`
	// Consistent is false when the terms do not account for the published
	// values (see check).
	Consistent bool `json:"consistent"`
}

// Run reads the node and explains it.
func (e *ExplainOptions) Run(ctx context.Context) error {
	names, _ := e.names()
	c, err := e.clients()
	if err != nil {
		return err
	}
	node, err := c.Kube.CoreV1().Nodes().Get(ctx, e.Node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := e.Now()
	lease, err := e.leaderLease(ctx, c.Kube, now)
	if err != nil {
		fmt.Fprintf(e.Streams.ErrOut, "Warning: %v; not taken into account.\n", err)
	}
	if e.output.machineReadable() {
		r, err := explainReport(node, names, now, e.StaleAfter, lease)
		if err != nil {
			return err
		}
		if err := e.output.printDocument(e.Streams.Out, r); err != nil {
			return err
		}
		if !r.Consistent {
			return errInconsistent
		}
		return nil
	}
	return writeExplain(e.Streams.Out, node, names, now, e.StaleAfter, lease)
}

var errInconsistent = errors.New("the explanation does not evaluate to the published values")

// judgeForExplain judges the node's annotation, turning the two verdicts
// that leave nothing to explain into errors.
func judgeForExplain(node *corev1.Node, names reclaimable.Names, now time.Time, staleAfter time.Duration, lease *LeaseReport) (reclaimable.Freshness, error) {
	value, present := node.Annotations[names.Annotation]
	f := judge(value, present, now, staleAfter, lease)
	switch f.Reason {
	case reclaimable.ReasonMissing:
		return f, fmt.Errorf("node %q has no %s annotation: kube-reclaim has published nothing for it, so the webhook and the extender count it as zero. "+
			"Check that the publisher is running and leading, that it uses --resource-domain %s, and that it can patch this node (its logs say why it skipped it)",
			node.Name, names.Annotation, names.Domain)
	case reclaimable.ReasonMalformed:
		return f, fmt.Errorf("node %q: the %s annotation cannot be read (%s), so the webhook and the extender count the node as zero. "+
			"Only the publisher should write it; it rewrites it on its next cycle",
			node.Name, names.Annotation, f.Detail)
	}
	return f, nil
}

func explainReport(node *corev1.Node, names reclaimable.Names, now time.Time, staleAfter time.Duration, lease *LeaseReport) (*ExplainReport, error) {
	f, err := judgeForExplain(node, names, now, staleAfter, lease)
	if err != nil {
		return nil, err
	}
	a := f.Annotation
	r := &ExplainReport{TypeMeta: typeMeta("NodeExplanation"), Node: node.Name, Time: now, Fresh: f.Fresh, StaleReason: f.Reason, StaleDetail: f.Detail,
		Published: f.Room, Held: a.HeldOrZero(), Floor: f.Room.Max(a.HeldOrZero()), PublisherLease: lease, Annotation: a, Consistent: true}
	if a.Explanation != nil {
		ev := reclaimable.Resources{CPUMilli: a.Explanation.CPU.Evaluate(), MemoryBytes: a.Explanation.Memory.Evaluate()}
		r.Evaluated = &ev
		r.Consistent = checkResource(a.Explanation.CPU, a.CPUMilli) <= checkKept && checkResource(a.Explanation.Memory, a.MemoryBytes) <= checkKept
	}
	return r, nil
}

// writeExplain renders the explanation of one node as text. It returns an
// error, after writing everything, when the terms do not evaluate to the
// published values.
func writeExplain(out io.Writer, node *corev1.Node, names reclaimable.Names, now time.Time, staleAfter time.Duration, lease *LeaseReport) error {
	f, err := judgeForExplain(node, names, now, staleAfter, lease)
	if err != nil {
		return err
	}
	f = escapedFreshness(f)
	out = textWriter{out}
	a := f.Annotation
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "Node:\t%s\n", node.Name)
	pol := a.Policy
	if a.Pool != "" {
		pol += fmt.Sprintf(" (pool \"%s\")", a.Pool)
	}
	fmt.Fprintf(w, "Policy:\t%s\n", pol)
	fmt.Fprintf(w, "Written:\t%s ago (%s)\n", age(now, a.WriteTime), a.WriteTime.UTC().Format(time.RFC3339))
	if a.MetricsTime.IsZero() {
		fmt.Fprintf(w, "Usage sample:\t<none>\n")
	} else {
		fmt.Fprintf(w, "Usage sample:\t%s ago, %s before the write (%s)\n",
			age(now, a.MetricsTime), shortDuration(a.WriteTime.Sub(a.MetricsTime)), a.MetricsTime.UTC().Format(time.RFC3339))
	}
	held := a.HeldOrZero()
	floor := f.Room.Max(held)
	fmt.Fprintf(w, "Held:\tcpu %s, memory %s (what reclaimed pods held at the write)\n", FormatCPU(held.CPUMilli), memoryExact(held.MemoryBytes))
	fmt.Fprintf(w, "Floor:\tcpu %s, memory %s (max of held and the room in effect: the status value kubelet admits against)\n",
		FormatCPU(floor.CPUMilli), memoryExact(floor.MemoryBytes))
	fmt.Fprintf(w, "Annotated:\tcpu %s, memory %s\n", FormatCPU(a.CPUMilli), memoryExact(a.MemoryBytes))
	if f.Fresh {
		fmt.Fprintf(w, "In effect:\tcpu %s, memory %s\n", FormatCPU(a.CPUMilli), memoryExact(a.MemoryBytes))
	} else {
		fmt.Fprintf(w, "In effect:\tcpu 0, memory 0 (stale)\n")
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nStatus: %s\n", statusWords(node.Name, f, a, staleAfter))
	if a.Explanation == nil {
		fmt.Fprintln(out, "\nThe annotation carries no explanation (the publisher that wrote it does not record one).")
		return nil
	}
	if !f.Fresh {
		fmt.Fprintln(out, "\nThe terms below are those of the last computation, when the annotation was written.")
	}
	ok := writeResource(out, "CPU", a.Explanation.CPU, a.CPUMilli, FormatCPU)
	ok = writeResource(out, "Memory", a.Explanation.Memory, a.MemoryBytes, memoryExact) && ok
	if !ok {
		return errInconsistent
	}
	return nil
}

// statusWords says in words whether the values count and why not.
func statusWords(node string, f reclaimable.Freshness, a *reclaimable.Annotation, staleAfter time.Duration) string {
	if !f.Fresh {
		switch f.Reason {
		case reclaimable.ReasonWriteTooOld:
			return fmt.Sprintf("Stale (%s): %s. The publisher rewrites the annotation at least every refresh interval, so it is down, not leading, "+
				"or failing to patch the node (check its pods and logs). The extender offers no room and the webhook writes only what reclaimed pods held "+
				"until it writes again; pods already bound keep running.", f.Reason, f.Detail)
		case reclaimable.ReasonFuture:
			return fmt.Sprintf("Stale (%s): %s, more than --stale-after (%s) ahead of this machine's clock. "+
				"Check the clocks of the publisher's node and of this machine; the extender offers no room and the webhook writes only what reclaimed pods held.",
				f.Reason, f.Detail, staleAfter)
		case reclaimable.ReasonPublisherDown:
			return fmt.Sprintf("Stale (%s): %s. No publisher is leading: check the publisher's pods and logs. "+
				"The extender offers no room on any node, and the webhook writes only what reclaimed pods held, until a publisher renews the Lease.", f.Reason, f.Detail)
		}
		return fmt.Sprintf("Stale (%s): %s; the extender offers no room and the webhook writes only what reclaimed pods held.", f.Reason, f.Detail)
	}
	switch a.ZeroReason {
	case "":
		return "Fresh: the webhook and the extender offer these values to reclaimed pods."
	case policy.ZeroReasonStale:
		return fmt.Sprintf("Zero on purpose (%s): the newest usage sample of the node was too old when the publisher ran, "+
			"and a value computed from old usage could over-book the node. Check metrics-server and the node's kubelet "+
			"resource metrics; the publisher republishes as soon as fresh samples arrive.", a.ZeroReason)
	case policy.ZeroReasonNoSamples:
		return fmt.Sprintf("Zero on purpose (%s): metrics.k8s.io has no usage sample of this node, so the usage policies cannot compute anything. "+
			"Check that metrics-server scrapes the node (kubectl top node %s).", a.ZeroReason, node)
	case policy.ZeroReasonInvalidSettings:
		return fmt.Sprintf("Zero on purpose (%s): the policy configuration selected for this node is invalid; "+
			"fix the publisher's policy file (its logs name the problem).", a.ZeroReason)
	}
	return fmt.Sprintf("Zero on purpose (%s).", a.ZeroReason)
}

// Words for the term names of reclaimable.Term; the term's note adds the detail.
var termWords = map[string]string{
	policy.TermAllocatable:        "allocatable %s of the node",
	policy.TermMargin:             "safety margin",
	policy.TermRegularPeakUsage:   "usage of everything not reclaimed",
	policy.TermSystemUsage:        "of which used outside any pod, for information",
	policy.TermUnmeasuredRequests: "regular pods not measured yet",
	policy.TermRegularRequests:    "regular (not reclaimed) pods",
	policy.TermFloor:              "never below this",
	policy.TermCap:                "never above this",
	policy.TermMinimum:            "zero when below this minimum",
	policy.TermNoSamples:          "no usage sample of the node, publish zero",
	policy.TermMetricsStale:       "usage samples too old, publish zero",
	policy.TermInvalid:            "invalid policy settings, publish zero",
}

var opWords = map[string]string{
	reclaimable.OpBase:     "start at",
	reclaimable.OpSubtract: "minus",
	reclaimable.OpFloor:    "at least",
	reclaimable.OpCap:      "at most",
	reclaimable.OpMinimum:  "zero below",
	reclaimable.OpInfo:     "(info)",
}

func termMeaning(t reclaimable.Term, resource string) string {
	words, ok := termWords[t.Name]
	if !ok {
		words = t.Name
	}
	if strings.Contains(words, "%s") {
		words = fmt.Sprintf(words, resource)
	}
	if t.Note != "" {
		return words + ": " + t.Note
	}
	return words
}

// Outcomes of checking a resource's terms against the published value.
type check int

const (
	// checkOK: the terms evaluate to the recorded result and the published value.
	checkOK check = iota
	// checkKept: the terms evaluate to the recorded result, and the annotation
	// publishes more: the publisher kept the previous value because the
	// decrease was below its --decrease-threshold (measurement noise) and the
	// reclaimed pods on the node still fit.
	checkKept
	// checkMismatch: the annotation publishes less than the terms give, which
	// the publisher never does.
	checkMismatch
	// checkBroken: the terms do not evaluate to the result the explanation records.
	checkBroken
)

func checkResource(re reclaimable.ResourceExplanation, published int64) check {
	v := re.Evaluate()
	switch {
	case v != re.Result:
		return checkBroken
	case v == published:
		return checkOK
	case published > v:
		return checkKept
	}
	return checkMismatch
}

// writeResource writes the terms of one resource and the check; it reports
// whether the terms account for the published value.
func writeResource(out io.Writer, title string, re reclaimable.ResourceExplanation, published int64, format func(int64) string) bool {
	evaluated := writeTerms(out, title, re, format)
	switch checkResource(re, published) {
	case checkOK:
		fmt.Fprintf(out, "  check: the terms evaluate to %s, the published value.\n", format(published))
		return true
	case checkKept:
		fmt.Fprintf(out, "  check: the terms evaluate to %s; the annotation publishes %s, the previous value, kept because the decrease "+
			"is below the publisher's --decrease-threshold (noise) and the reclaimed pods on the node still fit.\n",
			format(evaluated), format(published))
		return true
	case checkMismatch:
		fmt.Fprintf(out, "  check FAILED: the terms evaluate to %s but the annotation publishes %s; the publisher never publishes less "+
			"than its terms give (edited by hand, or written by another publisher version?).\n", format(evaluated), format(published))
		return false
	}
	fmt.Fprintf(out, "  check FAILED: the terms evaluate to %s but the explanation records %s as their result (a publisher bug).\n",
		format(evaluated), format(re.Result))
	return false
}

// writeTerms writes the formula of one resource, a row per term with the
// running result, and what the terms evaluate to, which it returns.
func writeTerms(out io.Writer, title string, re reclaimable.ResourceExplanation, format func(int64) string) int64 {
	fmt.Fprintf(out, "\n%s: %s\n", title, formula(re.Terms))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  TERM\tOP\tVALUE\tRUNNING\tMEANING")
	var v int64
	for _, t := range re.Terms {
		v = t.Apply(v)
		op, ok := opWords[t.Op]
		if !ok {
			op = t.Op
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", t.Name, op, format(t.Value), format(v), termMeaning(t, strings.ToLower(title)))
	}
	w.Flush()
	evaluated := re.Evaluate()
	fmt.Fprintf(out, "  = %s\n", format(evaluated))
	return evaluated
}

// formula writes the terms as one line: "allocatable - margin - peak, at
// least floor, at most cap, zero below minimum".
func formula(terms []reclaimable.Term) string {
	var b strings.Builder
	for _, t := range terms {
		switch t.Op {
		case reclaimable.OpBase:
			if b.Len() > 0 {
				b.WriteString(", then ")
			}
			b.WriteString(t.Name)
		case reclaimable.OpSubtract:
			b.WriteString(" - " + t.Name)
		case reclaimable.OpFloor:
			b.WriteString(", at least " + t.Name)
		case reclaimable.OpCap:
			b.WriteString(", at most " + t.Name)
		case reclaimable.OpMinimum:
			b.WriteString(", zero below " + t.Name)
		}
	}
	return b.String()
}

// shortDuration renders d like kubectl (HumanDuration), "0s" when negative.
func shortDuration(d time.Duration) string {
	return duration.HumanDuration(max(d, 0))
}
