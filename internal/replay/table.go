package replay

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints the trace summary, the quirk counts and one row per
// contender (the cluster's measures).
func WriteTable(w io.Writer, rep *Report) error {
	t := rep.Trace
	q := t.Quirks
	packing := "as the file names them"
	if t.Packed {
		packing = "packed first-fit decreasing by request"
	}
	fmt.Fprintf(w, "Trace: %s to %s, step %s (%d steps), %d pods on %d nodes of %s, %s.\n",
		t.Start.Format("2006-01-02 15:04"), t.End.Format("2006-01-02 15:04"), t.Step, t.Steps, t.Pods, t.Nodes,
		resources(t.Allocatable.CPUMilli, t.Allocatable.MemoryBytes), packing)
	fmt.Fprintf(w, "Input rules (rows %d): zero request, dropped %d; memory reading missing, last reading repeated %d; "+
		"CPU above request, clamped %d; memory above request, clamped %d; merged into one step %d; realigned to the step %d; "+
		"request changed (largest kept) %d; gap steps, last reading repeated %d; pods without usable row %d; pods larger than a node %d.\n\n",
		q.Rows, q.ZeroRequestRows, q.MemoryMissingRows, q.CPUAboveRequestRows, q.MemoryAboveRequestRows, q.MergedRows,
		q.RealignedRows, q.RequestChanges, q.GapSteps, q.PodsWithoutUsableRow, q.PodsTooLarge)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tCPU RECLAIMED\tCPU VIOLATIONS\tCPU EXCESS MEAN/MAX\tCPU LONGEST\tMEMORY RECLAIMED\tMEMORY VIOLATIONS\tMEMORY EXCESS MEAN/MAX\tMEMORY LONGEST\tEVICTIONS\tWRITES")
	for _, r := range rep.Results {
		c, m := r.Cluster.CPU, r.Cluster.Memory
		name := r.Name
		if r.Baseline {
			name += " (baseline)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s\t%s\t%s\t%s\t%s/%s\t%s\t%d\t%d\n", name,
			pct(c.ReclaimedShare), rate(c), pct(c.MeanExcess), pct(c.MaxExcess), c.LongestEpisode,
			pct(m.ReclaimedShare), rate(m), pct(m.MeanExcess), pct(m.MaxExcess), m.LongestEpisode,
			r.Cluster.Evictions, r.Cluster.Writes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "\nRECLAIMED: room in force / capacity regular work left unused; VIOLATIONS: node-intervals where usage + room > allocatable (count, share); EXCESS: by how much, as a share of allocatable; LONGEST: the longest run of violations on one node.")
	return err
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

func rate(m ResourceMeasures) string {
	return fmt.Sprintf("%d (%.3f%%)", m.Violations, 100*m.ViolationRate)
}

func resources(cpuMilli, memBytes int64) string {
	return fmt.Sprintf("%g cores/%g GiB", float64(cpuMilli)/1000, float64(memBytes)/(1<<30))
}
