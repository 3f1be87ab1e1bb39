package main

import (
	"fmt"
	"reflect"
	"strconv"
)

// goal is one threshold of the performance goals. docs/design.md's goal
// table states the same thresholds in prose; goals_test.go holds the two to
// each other, so a goal changes here and there together or the test fails.
type goal struct {
	// Row is the id of docs/design.md's goal table that states the goal.
	Row string
	Op  string // atLeast, below or atMost
	// Value is in Unit; for a relative goal it is the least ratio to the
	// baseline measured in the same run.
	Value    float64
	Unit     string
	Relative bool
	// Phrase, when set, is how the table states a goal that has no number
	// (Value is then 1 for "yes"); the test looks for the phrase instead.
	Phrase string
	// MedianOf, when set, puts the goal on the median of this many
	// consecutive runs, not on each run; the table says "median of N".
	MedianOf int
}

// goals is the one table of the thresholds in code. Every field is a goal:
// goals_test.go walks them all.
var goals = struct {
	WebhookCPU, WebhookThroughput, WebhookP99                     goal
	SchedulingRatio, PluginSchedulingRatio                        goal
	Extender500, Extender5000                                     goal
	PublisherCycleCPU, PublisherWrites                            goal
	PublisherPeak, ExtenderPeak                                   goal
	ScalePublisherPeak, ScaleExtenderPeak, ScalePublisherCycleCPU goal
	ReplayCPUViolations, ReplayRegularHarm, ReplayReclaimed       goal
	ReplayEvictions, ReplayStatusFloor                            goal
	ReplayNotDominated, ReplayCPUTime                             goal
}{
	WebhookCPU:        goal{Row: "P1", Op: atMost, Value: 0.3, Unit: "ms"},
	WebhookThroughput: goal{Row: "P1", Op: atLeast, Value: 0.7, Relative: true},
	WebhookP99:        goal{Row: "P1", Op: below, Value: 5, Unit: "ms"},

	// One run's ratio swings by more than the extender costs (the same
	// phase repeated differs by up to a quarter): the median of consecutive
	// runs is held to it (issue 39).
	SchedulingRatio: goal{Row: "P2", Op: atLeast, Value: 0.9, Relative: true, MedianOf: 5},
	// The plugin topology (issue 43): kube-reclaim-scheduler places in
	// process, so reclaimed pods are held to about the native rate of the
	// same binary, judged as the extender topology's.
	PluginSchedulingRatio: goal{Row: "P2", Op: atLeast, Value: 0.98, Relative: true, MedianOf: 5},

	Extender500:  goal{Row: "P3", Op: below, Value: 1, Unit: "ms"},
	Extender5000: goal{Row: "P3", Op: below, Value: 5, Unit: "ms"},

	PublisherCycleCPU: goal{Row: "P4", Op: below, Value: 0.5, Unit: "s"},
	PublisherWrites:   goal{Row: "P4", Op: atMost, Value: 1},
	// Peaks are each process's kernel high-water mark, start-up included:
	// what a memory limit has to allow.
	PublisherPeak:          goal{Row: "P4", Op: below, Value: 200, Unit: "MB"},
	ExtenderPeak:           goal{Row: "P4", Op: below, Value: 150, Unit: "MB"},
	ScalePublisherPeak:     goal{Row: "P4", Op: below, Value: 100, Unit: "MiB"},
	ScaleExtenderPeak:      goal{Row: "P4", Op: below, Value: 80, Unit: "MiB"},
	ScalePublisherCycleCPU: goal{Row: "P4", Op: below, Value: 0.15, Unit: "s"},

	// Against what batch pods hold, which they keep until they complete or
	// are evicted, whatever the room does.
	ReplayCPUViolations: goal{Row: "R", Op: atMost, Value: 1, Unit: "%"},
	// Node-intervals where regular memory use + batch memory held exceeds
	// allocatable.
	ReplayRegularHarm: goal{Row: "R", Op: atMost, Value: 0, Phrase: "regular harm 0 node-intervals"},
	// Of the capacity regular work leaves unused, for each resource.
	ReplayReclaimed: goal{Row: "R", Op: atLeast, Value: 50, Unit: "%"},
	// Per 100 batch pod-hours; Borg's non-production tier saw about 1.8.
	ReplayEvictions:    goal{Row: "R", Op: atMost, Value: 2, Phrase: "at most 2 evictions per 100 batch pod-hours"},
	ReplayStatusFloor:  goal{Row: "R", Op: atMost, Value: 0, Phrase: "the status never below what batch pods hold"},
	ReplayNotDominated: goal{Row: "R", Op: atLeast, Value: 1, Phrase: "dominated by neither baseline"},
	ReplayCPUTime:      goal{Row: "R", Op: below, Value: 30, Unit: "s"},
}

// allGoals lists the fields of goals by name.
func allGoals() map[string]goal {
	v := reflect.ValueOf(goals)
	out := make(map[string]goal, v.NumField())
	for i := range v.NumField() {
		out[v.Type().Field(i).Name] = v.Field(i).Interface().(goal)
	}
	return out
}

// on sets the goal of a row of the table; a goal that is not relative also
// sets the unit the row is measured in, which is the goal's.
func (g goal) on(r row) row {
	r.GoalOp, r.Goal, r.Relative = g.Op, g.Value, g.Relative
	if !g.Relative {
		r.Unit = g.Unit
	}
	return r
}

// String is the goal as the commands print it.
func (g goal) String() string {
	if g.Relative {
		return fmt.Sprintf("%s %.2f× baseline", g.Op, g.Value)
	}
	if g.Unit == "" {
		return g.Op + " " + strconv.FormatFloat(g.Value, 'f', -1, 64)
	}
	return g.Op + " " + strconv.FormatFloat(g.Value, 'f', -1, 64) + " " + g.Unit
}
