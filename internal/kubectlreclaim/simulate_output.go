package kubectlreclaim

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// simulateColumns are the table's columns; the published and compare
// columns appear only when there is something to show.
func simulateColumns(r *SimulationReport) []metav1.TableColumnDefinition {
	cols := []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "Name of the node."},
		{Name: "Allocatable", Type: "string", Description: "Native allocatable cpu/memory."},
		{Name: "Regular-Usage", Type: "string", Description: "Usage of regular (not reclaimed) work the policy subtracts: its peak over the window; - when the policy does not read usage."},
		{Name: "Reclaimable", Type: "string", Description: "What the policy would publish."},
		{Name: "Zero-Reason", Type: "string", Description: "Why the policy publishes zero on purpose; empty otherwise."},
	}
	if r.Installed {
		cols = append(cols,
			metav1.TableColumnDefinition{Name: "Published", Type: "string", Description: "The room kube-reclaim publishes now (0/0 when stale); <none> without annotation."},
			metav1.TableColumnDefinition{Name: "Difference", Type: "string", Description: "Reclaimable minus published."})
	}
	if r.Compare != "" {
		cols = append(cols,
			metav1.TableColumnDefinition{Name: "Compare", Type: "string", Description: "What the --compare policy would publish."},
			metav1.TableColumnDefinition{Name: "Change", Type: "string", Description: "Compare minus reclaimable."})
	}
	return append(cols,
		metav1.TableColumnDefinition{Name: "Policy", Type: "string", Priority: 1, Description: "Policy (and pool) of the node."},
		metav1.TableColumnDefinition{Name: "Samples", Type: "integer", Priority: 1, Description: "Usage samples of the node the policy saw."},
		metav1.TableColumnDefinition{Name: "Pods-Fit", Type: "integer", Priority: 1, Description: "Pods of --pod-shape the reclaimable capacity holds."})
}

func simulateTable(r *SimulationReport) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: simulateColumns(r), Rows: make([]metav1.TableRow, 0, len(r.Items))}
	opt := func(p *reclaimable.Resources) string {
		if p == nil {
			return "-"
		}
		return pair(*p)
	}
	for i := range r.Items {
		n := &r.Items[i]
		cells := []any{n.Name, pair(n.Allocatable), opt(n.RegularUsage), pair(n.Reclaimable), n.ZeroReason}
		if r.Installed {
			pub := "<none>"
			if n.Published != nil {
				pub = pair(*n.Published)
				if n.PublishedStale != "" {
					pub += " (stale)"
				}
			}
			cells = append(cells, pub, signedPair(n.Difference))
		}
		if r.Compare != "" {
			cells = append(cells, pair(n.Compare.Reclaimable), signedPair(n.Compare.Change))
		}
		pol := n.Policy
		if n.Pool != "" {
			pol += " (pool " + n.Pool + ")"
		}
		cells = append(cells, pol, int64(n.NodeSamples), n.PodsFit)
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells, Object: rowObject("Node", "", n.Name)})
	}
	return t
}

// signedPair renders a difference with its sign: +500m/-1Gi.
func signedPair(d *reclaimable.Resources) string {
	if d == nil {
		return "-"
	}
	sign := func(s string, v int64) string {
		if v > 0 {
			return "+" + s
		}
		return s
	}
	return sign(FormatCPU(d.CPUMilli), d.CPUMilli) + "/" + sign(FormatMemory(d.MemoryBytes), d.MemoryBytes)
}

// writeSummary writes the cluster summary below the table.
func writeSummary(out io.Writer, r *SimulationReport) error {
	out = textWriter{out}
	fmt.Fprintf(out, "\nPolicy: %s\n", r.Policy)
	if r.Compare != "" {
		fmt.Fprintf(out, "Compare: %s\n", r.Compare)
	}
	fmt.Fprintf(out, "Usage: %s\n", sampleWords(r))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "\nSUMMARY\t%s", "POLICY")
	if r.CompareSummary != nil {
		fmt.Fprintf(w, "\tCOMPARE")
	}
	fmt.Fprintln(w)
	rows := []struct {
		label string
		cell  func(*SimulationSummary) string
	}{
		{"nodes", func(s *SimulationSummary) string { return fmt.Sprint(s.Nodes) }},
		{"allocatable", func(s *SimulationSummary) string { return pair(s.Allocatable) }},
		{"reclaimable", func(s *SimulationSummary) string { return pair(s.Reclaimable) }},
		{"share of allocatable", func(s *SimulationSummary) string {
			return fmt.Sprintf("cpu %.1f%%, memory %.1f%%", s.CPUPercent, s.MemoryPercent)
		}},
		{"nodes' worth", func(s *SimulationSummary) string {
			return fmt.Sprintf("cpu %.1f, memory %.1f", s.CPUNodesWorth, s.MemoryNodesWorth)
		}},
		{"pods of " + pair(r.PodShape), func(s *SimulationSummary) string { return fmt.Sprint(s.PodsFit) }},
		{"zero on purpose", func(s *SimulationSummary) string {
			if len(s.ZeroNodes) == 0 {
				return "none"
			}
			parts := make([]string, 0, len(s.ZeroNodes))
			for _, z := range s.ZeroNodes {
				parts = append(parts, fmt.Sprintf("%d %s", z.Nodes, z.Reason))
			}
			return strings.Join(parts, ", ")
		}},
	}
	for _, row := range rows {
		fmt.Fprintf(w, "%s\t%s", row.label, row.cell(&r.Summary))
		if r.CompareSummary != nil {
			fmt.Fprintf(w, "\t%s", row.cell(r.CompareSummary))
		}
		fmt.Fprintln(w)
	}
	return w.Flush()
}

func sampleWords(r *SimulationReport) string {
	if r.Note != "" {
		return r.Note
	}
	return fmt.Sprintf("%d samples over %s", r.Samples, r.Duration)
}

// writeSimulatedNode renders one node with every term, as explain does.
func writeSimulatedNode(out io.Writer, r *SimulationReport, n *SimulatedNode) error {
	out = textWriter{out}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "Node:\t%s\n", n.Name)
	fmt.Fprintf(w, "Policy:\t%s, from %s\n", policyWords(&n.SimulatedResult), r.Policy)
	fmt.Fprintf(w, "Usage:\t%s\n", sampleWords(r))
	fmt.Fprintf(w, "Node samples:\t%d in the history\n", n.NodeSamples)
	fmt.Fprintf(w, "Allocatable:\tcpu %s, memory %s\n", FormatCPU(n.Allocatable.CPUMilli), memoryExact(n.Allocatable.MemoryBytes))
	fmt.Fprintf(w, "Reclaimable:\tcpu %s, memory %s%s\n", FormatCPU(n.Reclaimable.CPUMilli), memoryExact(n.Reclaimable.MemoryBytes), zeroWords(n.ZeroReason))
	if !n.Held.IsZero() {
		fmt.Fprintf(w, "Held:\tcpu %s, memory %s (reclaimed pods on the node)\n", FormatCPU(n.Held.CPUMilli), memoryExact(n.Held.MemoryBytes))
	}
	if n.Published != nil {
		stale := ""
		if n.PublishedStale != "" {
			stale = " (stale: " + n.PublishedStale + ")"
		}
		fmt.Fprintf(w, "Published now:\tcpu %s, memory %s%s; difference %s\n", FormatCPU(n.Published.CPUMilli), memoryExact(n.Published.MemoryBytes), stale, signedPair(n.Difference))
	}
	if n.Compare != nil {
		fmt.Fprintf(w, "Compare:\tcpu %s, memory %s%s under %s (%s); change %s\n", FormatCPU(n.Compare.Reclaimable.CPUMilli),
			memoryExact(n.Compare.Reclaimable.MemoryBytes), zeroWords(n.Compare.ZeroReason), policyWords(n.Compare), r.Compare, signedPair(n.Compare.Change))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, res := range []*SimulatedResult{&n.SimulatedResult, n.Compare} {
		if res == nil || res.Explanation == nil {
			continue
		}
		if n.Compare != nil {
			fmt.Fprintf(out, "\n--- %s\n", policyWords(res))
		}
		writeTerms(out, "CPU", res.Explanation.CPU, FormatCPU)
		writeTerms(out, "Memory", res.Explanation.Memory, memoryExact)
	}
	return nil
}

func policyWords(r *SimulatedResult) string {
	if r.Pool != "" {
		return fmt.Sprintf("%s (pool %q)", r.Policy, r.Pool)
	}
	return r.Policy
}

func zeroWords(reason string) string {
	if reason == "" {
		return ""
	}
	return " (zero on purpose: " + reason + ")"
}
