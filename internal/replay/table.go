package replay

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
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
	fmt.Fprintf(w, "Batch jobs run %s unless evicted.\n", rep.BatchLifetime)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tCPU RECLAIMED\tCPU VIOLATIONS\tCPU EXCESS MEAN/MAX\tCPU LONGEST\tCPU SHORTFALL\tMEMORY RECLAIMED\tREGULAR HARM\tEVICTIONS\tPER 100 POD-H\tCOMPLETED\tSTALE\tWRITES")
	for _, r := range rep.Results {
		c, m := r.Cluster.CPU, r.Cluster.Memory
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s\t%s\t%s\t%s\t%s\t%d\t%.2f\t%d\t%d\t%d\n", label(r),
			pct(c.ReclaimedShare), rate(c), pct(c.MeanExcess), pct(c.MaxExcess), c.LongestEpisode, pct(r.Cluster.CPUShortfall),
			pct(m.ReclaimedShare), rate(m), r.Cluster.Evictions, r.Cluster.EvictionsPer100PodHours, r.Cluster.Completed,
			r.Cluster.StaleIntervals, r.Cluster.Writes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nAcross nodes (median / worst node):")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tCPU RECLAIMED\tMEMORY RECLAIMED\tCPU VIOLATIONS\tCPU SHORTFALL\tREGULAR HARM\tEVICTIONS PER 100 POD-H")
	for _, r := range rep.Results {
		s := r.Spread
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", label(r),
			spreadCell(s.CPUReclaimed, pct), spreadCell(s.MemoryReclaimed, pct), spreadCell(s.CPUViolationRate, pct3),
			spreadCell(s.CPUShortfall, pct), spreadCell(s.RegularHarm, count), spreadCell(s.EvictionsPer100PodHours, num2))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "\nRECLAIMED: what batch pods held and could use, min(held, unused), over the capacity regular work left unused; "+
		"VIOLATIONS: node-intervals where regular usage + what batch pods held > allocatable (count, share); EXCESS: by how much, as a share of allocatable; "+
		"LONGEST: the longest run of violations on one node; SHORTFALL: the share of the CPU granted to batch pods that regular demand took back; "+
		"REGULAR HARM: the memory violations, an OOM risk to regular work; EVICTIONS: chosen by the eviction controller, and per 100 batch pod-hours; "+
		"COMPLETED: batch jobs that ran their lifetime; STALE: node-intervals with a zero room for stale samples.")
	return err
}

// label is a result's name, marked when it is a baseline.
func label(r Result) string {
	if r.Baseline {
		return r.Name + " (baseline)"
	}
	return r.Name
}

func spreadCell(s NodeSpread, f func(float64) string) string {
	return fmt.Sprintf("%s / %s (%s)", f(s.Median), f(s.Worst), s.WorstNode)
}

// MarkdownHeader is the header row of WriteMarkdown's table; the last
// column is the worst node's evictions per 100 pod-hours.
const MarkdownHeader = "| policy | jobs | CPU reclaimed | CPU violations | CPU shortfall | memory reclaimed | regular harm | evictions per 100 pod-h | worst node |"

// WriteMarkdown prints one row per contender of the figures docs/design.md
// records: marked is the name of the shipped contender, set in bold.
func WriteMarkdown(w io.Writer, reps []*Report, marked string) error {
	if _, err := fmt.Fprintln(w, MarkdownHeader+"\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |"); err != nil {
		return err
	}
	for _, rep := range reps {
		for _, r := range rep.Results {
			name := label(r)
			if r.Name == marked {
				name = "**" + name + "**"
			}
			c := r.Cluster
			if _, err := fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %d | %.2f | %.2f |\n", name, ShortDuration(rep.BatchLifetime),
				pct(c.CPU.ReclaimedShare), pct3(c.CPU.ViolationRate), pct(c.CPUShortfall), pct(c.Memory.ReclaimedShare),
				c.RegularHarm, c.EvictionsPer100PodHours, r.Spread.EvictionsPer100PodHours.Worst); err != nil {
				return err
			}
		}
	}
	return nil
}

// ShortDuration writes a whole number of hours or minutes without the zero
// parts time.Duration prints: 1h0m0s is 1h, 1h30m0s is 90m.
func ShortDuration(s string) string {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil || d <= 0:
		return s
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return s
}

func pct3(f float64) string  { return fmt.Sprintf("%.3f%%", 100*f) }
func num2(f float64) string  { return fmt.Sprintf("%.2f", f) }
func count(f float64) string { return fmt.Sprintf("%.0f", f) }

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

func rate(m ResourceMeasures) string {
	return fmt.Sprintf("%d (%.3f%%)", m.Violations, 100*m.ViolationRate)
}

func resources(cpuMilli, memBytes int64) string {
	return fmt.Sprintf("%g cores/%g GiB", float64(cpuMilli)/1000, float64(memBytes)/(1<<30))
}
