// Command promqlnames parses PromQL expressions with the Prometheus parser
// and prints the metric names each selects. The monitoring tests use it to
// check that dashboards and rules name only series the roles export; it
// lives in promtool's wrapper module so that the Prometheus module stays out
// of kube-reclaim's own go.mod.
//
// Input (stdin): a JSON array of expressions. Output (stdout): a JSON array
// of {"expr", "names", "error"}, in the same order.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

type result struct {
	Expr  string   `json:"expr"`
	Names []string `json:"names"`
	Error string   `json:"error,omitempty"`
}

func main() {
	var exprs []string
	if err := json.NewDecoder(os.Stdin).Decode(&exprs); err != nil {
		fmt.Fprintln(os.Stderr, "promqlnames: stdin must be a JSON array of PromQL expressions:", err)
		os.Exit(2)
	}
	out := make([]result, 0, len(exprs))
	for _, e := range exprs {
		out = append(out, names(e))
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "promqlnames:", err)
		os.Exit(1)
	}
}

func names(expr string) result {
	r := result{Expr: expr, Names: []string{}}
	parsed, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	parser.Inspect(parsed, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			// A selector without a plain name ({__name__=~"..."}) is
			// reported as its matcher, which no exported name equals.
			if m.Name == labels.MetricName && (name == "" || m.Type != labels.MatchEqual) {
				name = m.String()
			}
		}
		if !slices.Contains(r.Names, name) {
			r.Names = append(r.Names, name)
		}
		return nil
	})
	return r
}
