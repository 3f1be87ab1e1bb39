package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
)

// benchLine is one result line of `go test -bench`.
type benchLine struct {
	Pkg string `json:"pkg"`
	// Name without the GOMAXPROCS suffix, e.g. "BenchmarkHandler/patch".
	Name    string             `json:"name"`
	Procs   int                `json:"procs"`
	N       int64              `json:"n"`
	Metrics map[string]float64 `json:"metrics"`
}

// parseBench reads `go test -bench` output (several packages at once are
// fine: "pkg:" lines say which package the results below belong to). Lines
// that are not results (logs, PASS, ok) are skipped.
func parseBench(r io.Reader) ([]benchLine, error) {
	var (
		out []benchLine
		pkg string
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		if l, ok := parseBenchLine(line); ok {
			l.Pkg = pkg
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

// parseBenchLine parses "BenchmarkX/sub-2  100  123 ns/op  4 B/op  7.5 custom-unit".
func parseBenchLine(line string) (benchLine, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
		return benchLine{}, false
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return benchLine{}, false
	}
	l := benchLine{Name: f[0], Procs: 1, N: n, Metrics: map[string]float64{}}
	if i := strings.LastIndexByte(f[0], '-'); i > 0 {
		if p, err := strconv.Atoi(f[0][i+1:]); err == nil {
			l.Name, l.Procs = f[0][:i], p
		}
	}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return benchLine{}, false
		}
		l.Metrics[f[i+1]] = v
	}
	return l, true
}

// findBench returns the named result of pkg (a package path suffix, e.g.
// "/webhook").
func findBench(lines []benchLine, pkgSuffix, name string) (benchLine, bool) {
	for _, l := range lines {
		if strings.HasSuffix(l.Pkg, pkgSuffix) && l.Name == name {
			return l, true
		}
	}
	return benchLine{}, false
}

// goBench is one `go test -bench` invocation.
type goBench struct {
	pkg, bench, benchtime string
}

// runGoBench runs the benchmarks, echoing their output, and parses it.
func runGoBench(ctx context.Context, dir string, b goBench, out io.Writer) ([]benchLine, error) {
	args := []string{"test", "-run", "^$", "-bench", b.bench, "-benchtime", b.benchtime, "-benchmem", "-count", "1", "-timeout", "30m", b.pkg}
	fmt.Fprintf(out, "$ go %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); pw.Close() }()
	lines, perr := parseBench(io.TeeReader(pr, out))
	_, _ = io.Copy(io.Discard, pr)
	if err := <-done; err != nil {
		return lines, fmt.Errorf("go test %s: %w", b.pkg, err)
	}
	return lines, perr
}
