// Package dashboards builds the Grafana dashboards that
// deploy/components/monitoring ships, as Grafana JSON. They are generated
// rather than kept as hand-edited JSON: a panel is one line here instead of
// forty of JSON whose ids and grid positions must be kept consistent by
// hand, and every panel gets the same datasource variable and layout.
// Regenerate the committed files with `go run ./hack/dashboards`; a test
// fails when they differ from what Build returns.
package dashboards

import (
	"encoding/json"
	"fmt"
)

// Dir is where the generated files live, relative to the repository root.
const Dir = "deploy/components/monitoring/dashboards"

// File is one dashboard: its file name and JSON.
type File struct {
	Name string
	JSON []byte
}

// query is one PromQL target of a panel and its legend.
type query struct {
	expr, legend string
}

// panel is a time series (or, with stat set, a single value) panel.
type panel struct {
	title, description, unit string
	stat                     bool
	queries                  []query
}

type dashboard struct {
	file, uid, title, description string
	// scoped: the namespace and job variables besides cluster.
	scoped bool
	// rows of panels; each row is split evenly across the 24 columns.
	rows []row
}

type row struct {
	title  string
	panels []panel
}

// The dashboards' variables, as the kubernetes-mixin has them: every
// selector of every query carries the matchers of the variables of its
// dashboard, so that one Grafana reads many clusters (the label cluster,
// which a Prometheus per cluster usually adds as an external label when it
// writes to a shared store; with none, "All" matches the series without
// it), and the components dashboard one install or role.
const (
	// cluster is in every selector of both dashboards.
	cluster = `cluster=~"$cluster"`
	// all is in every selector of a series the roles export on the
	// components dashboard; the recording rules' series aggregate away
	// the namespace and job, so they carry cluster only.
	all = cluster + `, namespace=~"$namespace", job=~"$job"`
	// roles matches every role's job: the PodMonitors name them
	// kube-reclaim-<role>.
	roles = `kube-reclaim-.*`
)

// leader keeps the gauges of the publisher replica holding the lease: a
// standby's values are its last ones as leader.
const leader = ` and on (cluster, namespace, pod) (kube_reclaim_publisher_is_leader{` + cluster + `} == 1)`

func overview() dashboard {
	return dashboard{file: "kube-reclaim-overview.json", uid: "kube-reclaim-overview", title: "kube-reclaim / Overview",
		description: "Room kube-reclaim offers to batch pods, what they hold of it, the capacity regular pods requested and leave unused, per pool, the nodes that offer room, the reclaimed pods placed and waiting, and the evictions that protect regular pods.",
		rows: []row{
			overviewRoom(), overviewOverTime(), overviewPerPool(),
			overviewPerNode(), overviewReclaimedPods(), overviewEvictions(),
		}}
}

// overviewRoom is the row of the headline figures, as they are now.
func overviewRoom() row {
	return row{title: "Room", panels: []panel{
		{title: "Room CPU", unit: "cores", stat: true, description: "CPU published as reclaimable, summed over nodes.",
			queries: []query{{"kube_reclaim:room_cpu_millicores{" + cluster + "} / 1000", "room"}}},
		{title: "Room memory", unit: "bytes", stat: true, description: "Memory published as reclaimable, summed over nodes.",
			queries: []query{{"kube_reclaim:room_memory_bytes{" + cluster + "}", "room"}}},
		{title: "Held CPU", unit: "cores", stat: true, description: "CPU that batch pods hold of the room: the sum of their reclaimed requests.",
			queries: []query{{"kube_reclaim:held_cpu_millicores{" + cluster + "} / 1000", "held"}}},
		{title: "Unused requested CPU put to work", unit: "percentunit", stat: true,
			description: "CPU batch pods hold over the CPU regular pods requested and leave unused; above 100 % when batch pods also use capacity no regular pod requested.",
			queries:     []query{{"kube_reclaim:unused_requested_put_to_work_cpu:ratio{" + cluster + "}", "put to work"}}},
		{title: "Nodes with room", unit: "percentunit", stat: true, description: "Share of nodes whose room is above zero for CPU and memory.",
			queries: []query{{"kube_reclaim:nodes_with_room:ratio{" + cluster + "}", "nodes with room"}}},
		{title: "Pending reclaimed pods", unit: "short", stat: true, description: "Pods asking reclaimed resources that are not bound to a node yet.",
			queries: []query{{"sum(kube_reclaim:pending_reclaimed_pods{" + cluster + "})", "pending"}}},
	}}
}

// overviewOverTime is the row of room, held and unused requested capacity over time, and the nodes.
func overviewOverTime() row {
	return row{title: "Over time", panels: []panel{
		{title: "CPU: room, held, unused requested", unit: "cores",
			description: "Room published; what batch pods hold of it; what regular pods requested and leave unused (each pod's request minus its latest usage).",
			queries: []query{
				{"kube_reclaim:room_cpu_millicores{" + cluster + "} / 1000", "room"},
				{"kube_reclaim:held_cpu_millicores{" + cluster + "} / 1000", "held"},
				{"kube_reclaim:unused_requested_cpu_millicores{" + cluster + "} / 1000", "unused requested"},
			}},
		{title: "Memory: room, held, unused requested", unit: "bytes",
			description: "Room published; what batch pods hold of it; what regular pods requested and leave unused (each pod's request minus its latest usage).",
			queries: []query{
				{"kube_reclaim:room_memory_bytes{" + cluster + "}", "room"},
				{"kube_reclaim:held_memory_bytes{" + cluster + "}", "held"},
				{"kube_reclaim:unused_requested_memory_bytes{" + cluster + "}", "unused requested"},
			}},
		{title: "Nodes", unit: "short", description: "Nodes evaluated, with room, and published as zero on purpose by reason.",
			queries: []query{
				{"kube_reclaim:nodes_evaluated{" + cluster + "}", "evaluated"},
				{"kube_reclaim:nodes_with_room{" + cluster + "}", "with room"},
				{"max by (reason) (kube_reclaim_publisher_zero_nodes{" + cluster + "}" + leader + ")", "zero: {{reason}}"},
			}},
	}}
}

// overviewPerPool is the row of the same per pool of the policy file.
func overviewPerPool() row {
	return row{title: "Per pool", panels: []panel{
		{title: "CPU per pool", unit: "cores", description: "Room, held and unused requested CPU of each pool of the policy file (an empty pool: the default settings).",
			queries: []query{
				{"kube_reclaim:pool_room_cpu_millicores{" + cluster + "} / 1000", "room {{pool}}"},
				{"kube_reclaim:pool_held_cpu_millicores{" + cluster + "} / 1000", "held {{pool}}"},
				{"kube_reclaim:pool_unused_requested_cpu_millicores{" + cluster + "} / 1000", "unused requested {{pool}}"},
			}},
		{title: "Memory per pool", unit: "bytes", description: "Room, held and unused requested memory of each pool of the policy file (an empty pool: the default settings).",
			queries: []query{
				{"kube_reclaim:pool_room_memory_bytes{" + cluster + "}", "room {{pool}}"},
				{"kube_reclaim:pool_held_memory_bytes{" + cluster + "}", "held {{pool}}"},
				{"kube_reclaim:pool_unused_requested_memory_bytes{" + cluster + "}", "unused requested {{pool}}"},
			}},
	}}
}

// overviewPerNode is the row of the publisher's per-node series, when it exports them.
func overviewPerNode() row {
	return row{title: "Per node (publisher --per-node-metrics)", panels: []panel{
		{title: "Room CPU per node", unit: "cores",
			queries: []query{{"max by (node) (kube_reclaim_publisher_published_cpu_millicores{" + cluster + "}" + leader + ") / 1000", "{{node}}"}}},
		{title: "Held CPU per node", unit: "cores",
			queries: []query{{"max by (node) (kube_reclaim_publisher_held_cpu_millicores{" + cluster + "}" + leader + ") / 1000", "{{node}}"}}},
		{title: "Room memory per node", unit: "bytes",
			queries: []query{{"max by (node) (kube_reclaim_publisher_published_memory_bytes{" + cluster + "}" + leader + ")", "{{node}}"}}},
	}}
}

// overviewReclaimedPods is the row of pending and placed reclaimed pods, and the filter's refusals.
func overviewReclaimedPods() row {
	return row{title: "Reclaimed pods", panels: []panel{
		{title: "Pending reclaimed pods", unit: "short",
			description: "Pods asking reclaimed resources not bound yet, by time since their creation.",
			queries:     []query{{"kube_reclaim:pending_reclaimed_pods{" + cluster + "}", "{{age}}"}}},
		{title: "Oldest pending reclaimed pod", unit: "s",
			description: "How long the oldest reclaimed pod not bound yet has waited; KubeReclaimReclaimedPodsPending fires past 30 minutes while batch pods hold under half the room.",
			queries:     []query{{"max(kube_reclaim_extender_oldest_pending_reclaimed_pod_age_seconds{" + cluster + "})", "oldest"}}},
		{title: "Reclaimed pods placed and binds", unit: "short",
			description: "Placed pods, and the scheduler's filter calls for reclaimed pods against successful binds.",
			queries: []query{
				{"kube_reclaim:placed_reclaimed_pods{" + cluster + "}", "placed"},
				{`sum(rate(kube_reclaim_extender_http_request_duration_seconds_count{` + cluster + `, route="filter"}[5m]))`, "filter calls/s"},
				{"kube_reclaim:extender_binds:rate5m{" + cluster + "}", "binds/s {{result}}"},
			}},
		{title: "Nodes failed by the filter", unit: "short",
			queries: []query{{"sum by (reason) (rate(kube_reclaim_extender_filtered_nodes_total{" + cluster + "}[5m]))", "{{reason}}"}}},
	}}
}

// overviewEvictions is the row of evictions and the nodes over their room.
func overviewEvictions() row {
	return row{title: "Evictions", panels: []panel{
		{title: "Evictions", unit: "short", description: "Reclaimed pods evicted (on) or that would have been (dry-run), per second; refused by a PodDisruptionBudget; put off by the rate limit.",
			queries: []query{
				{"kube_reclaim:evictions:rate10m{" + cluster + "}", "{{mode}}"},
				{"sum(rate(kube_reclaim_publisher_evictions_blocked_total{" + cluster + "}[10m]))", "blocked by PDB"},
				{"sum(rate(kube_reclaim_publisher_evictions_rate_limited_total{" + cluster + "}[10m]))", "rate limited"},
			}},
		{title: "Nodes over room", unit: "short", description: "Nodes whose reclaimed pods held more than the room in the last cycle.",
			queries: []query{{"max(kube_reclaim_publisher_nodes_over_room{" + cluster + "}" + leader + ")", "nodes"}}},
	}}
}

func components() dashboard {
	return dashboard{file: "kube-reclaim-components.json", uid: "kube-reclaim-components", title: "kube-reclaim / Components", scoped: true,
		description: "Rate, errors and latency of every role's request paths, writes to the API server, and the publisher's leader.",
		rows: []row{
			{title: "Publisher", panels: []panel{
				{title: "Leader", unit: "short", description: "1 on the replica holding the lease.",
					queries: []query{{"kube_reclaim_publisher_is_leader{" + all + "}", "{{pod}}"}}},
				{title: "Cycle duration p99", unit: "s",
					queries: []query{{"histogram_quantile(0.99, sum by (le) (rate(kube_reclaim_publisher_cycle_duration_seconds_bucket{" + all + "}[5m])))", "p99"}}},
				{title: "Writes to the API server", unit: "reqps", description: "Node status patches by kind and reason, evictions, and failures.",
					queries: []query{
						{"kube_reclaim:publisher_writes:rate5m{" + cluster + "}", "{{kind}} {{reason}}"},
						{"sum(rate(kube_reclaim_publisher_evictions_total{" + all + "}[5m]))", "evictions"},
						{"sum(rate(kube_reclaim_publisher_metrics_api_errors_total{" + all + "}[5m]))", "metrics.k8s.io read errors"},
					}},
			}},
			{title: "Webhook", panels: []panel{
				{title: "Node status reviews", unit: "reqps",
					queries: []query{{"kube_reclaim:webhook_node_reviews:rate5m{" + cluster + "}", "{{outcome}}"}}},
				{title: "Pod reviews", unit: "reqps",
					queries: []query{{"kube_reclaim:webhook_pod_reviews:rate5m{" + cluster + "}", "{{outcome}}"}}},
				{title: "Review latency p99", unit: "s",
					queries: []query{
						{"kube_reclaim:webhook_node_review_duration_seconds:p99_5m{" + cluster + "}", "nodes"},
						{"histogram_quantile(0.99, sum by (le) (rate(kube_reclaim_webhook_pod_review_duration_seconds_bucket{" + all + "}[5m])))", "pods"},
					}},
				{title: "Errors and refusals", unit: "reqps",
					queries: []query{
						{"sum by (kind) (rate(kube_reclaim_webhook_errors_total{" + all + "}[5m])) > 0", "error {{kind}}"},
						{"sum by (reason) (rate(kube_reclaim_webhook_pod_denials_total{" + all + "}[5m])) > 0", "denied {{reason}}"},
						{"sum by (route, result) (rate(kube_reclaim_webhook_in_flight_waits_total{" + all + "}[5m])) > 0", "wait {{route}} {{result}}"},
					}},
				{title: "In flight", unit: "short",
					queries: []query{{"sum(kube_reclaim_webhook_in_flight_reviews{" + all + "})", "reviews"}}},
			}},
			{title: "Extender", panels: []panel{
				{title: "Requests", unit: "reqps",
					queries: []query{{"sum by (route, code) (rate(kube_reclaim_extender_http_request_duration_seconds_count{" + all + "}[5m]))", "{{route}} {{code}}"}}},
				{title: "Request latency p99", unit: "s",
					queries: []query{{"histogram_quantile(0.99, sum by (route, le) (rate(kube_reclaim_extender_http_request_duration_seconds_bucket{" + all + "}[5m])))", "{{route}}"}}},
				{title: "Binds", unit: "reqps",
					queries: []query{{"kube_reclaim:extender_binds:rate5m{" + cluster + "}", "{{result}}"}}},
			}},
			{title: "Processes", panels: []panel{
				{title: "Scrape targets up", unit: "short",
					queries: []query{{"sum by (job) (up{" + all + "})", "{{job}}"}}},
				{title: "Metrics requests", unit: "reqps", description: "Requests to the roles' /metrics by outcome of authentication and authorization.",
					queries: []query{{"sum by (job, outcome) (rate(kube_reclaim_metrics_requests_total{" + all + "}[5m]))", "{{job}} {{outcome}}"}}},
				{title: "CPU", unit: "cores",
					queries: []query{{"sum by (job, pod) (rate(process_cpu_seconds_total{" + all + "}[5m]))", "{{pod}}"}}},
				{title: "Memory", unit: "bytes",
					queries: []query{{"sum by (job, pod) (process_resident_memory_bytes{" + all + "})", "{{pod}}"}}},
			}},
		}}
}

// Build returns every dashboard's file.
func Build() ([]File, error) {
	var out []File
	for _, d := range []dashboard{overview(), components()} {
		b, err := json.MarshalIndent(d.grafana(), "", "  ")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.file, err)
		}
		out = append(out, File{Name: d.file, JSON: append(b, '\n')})
	}
	return out, nil
}

// The Grafana JSON model, limited to the fields used.
type (
	gDashboard struct {
		UID           string      `json:"uid"`
		Title         string      `json:"title"`
		Description   string      `json:"description"`
		Tags          []string    `json:"tags"`
		Editable      bool        `json:"editable"`
		SchemaVersion int         `json:"schemaVersion"`
		Refresh       string      `json:"refresh"`
		Time          gTime       `json:"time"`
		Templating    gTemplating `json:"templating"`
		Panels        []gPanel    `json:"panels"`
	}
	gTime       struct{ From, To string }
	gTemplating struct {
		List []gVariable `json:"list"`
	}
	gVariable struct {
		Name       string       `json:"name"`
		Label      string       `json:"label"`
		Type       string       `json:"type"`
		Query      string       `json:"query"`
		Datasource *gDatasource `json:"datasource,omitempty"`
		// Refresh 2: on time range change, as the mixin's.
		Refresh    int    `json:"refresh,omitempty"`
		Multi      bool   `json:"multi,omitempty"`
		IncludeAll bool   `json:"includeAll,omitempty"`
		AllValue   string `json:"allValue,omitempty"`
		Sort       int    `json:"sort,omitempty"`
	}
	gDatasource struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
	gPanel struct {
		ID          int           `json:"id"`
		Type        string        `json:"type"`
		Title       string        `json:"title"`
		Description string        `json:"description,omitempty"`
		GridPos     gGridPos      `json:"gridPos"`
		Datasource  *gDatasource  `json:"datasource,omitempty"`
		FieldConfig *gFieldConfig `json:"fieldConfig,omitempty"`
		Targets     []gTarget     `json:"targets,omitempty"`
	}
	gGridPos     struct{ H, W, X, Y int }
	gFieldConfig struct {
		Defaults gDefaults `json:"defaults"`
	}
	gDefaults struct {
		Unit string `json:"unit"`
	}
	gTarget struct {
		RefID        string       `json:"refId"`
		Datasource   *gDatasource `json:"datasource"`
		Expr         string       `json:"expr"`
		LegendFormat string       `json:"legendFormat"`
	}
)

func (g gTime) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"from": g.From, "to": g.To})
}

func (g gGridPos) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]int{"h": g.H, "w": g.W, "x": g.X, "y": g.Y})
}

// variables are the data source, then cluster and, on a scoped dashboard,
// namespace and job, each chosen among those of the roles' up series under
// the ones before it; "All" (the default) matches every value, and no label
// at all.
func (d dashboard) variables(ds *gDatasource) []gVariable {
	up := func(matchers, label string) string {
		return "label_values(up{" + matchers + "}, " + label + ")"
	}
	v := func(name, label, query, allValue string) gVariable {
		return gVariable{Name: name, Label: label, Type: "query", Query: query, Datasource: ds, Refresh: 2,
			Multi: true, IncludeAll: true, AllValue: allValue, Sort: 1}
	}
	vars := []gVariable{{Name: "datasource", Label: "Data source", Type: "datasource", Query: "prometheus"},
		v("cluster", "Cluster", up(`job=~"`+roles+`"`, "cluster"), ".*")}
	if d.scoped {
		vars = append(vars,
			v("namespace", "Namespace", up(`job=~"`+roles+`", `+cluster, "namespace"), ".*"),
			v("job", "Role", up(`job=~"`+roles+`", `+cluster+`, namespace=~"$namespace"`, "job"), roles))
	}
	return vars
}

func (d dashboard) grafana() gDashboard {
	ds := &gDatasource{Type: "prometheus", UID: "${datasource}"}
	g := gDashboard{UID: d.uid, Title: d.title, Description: d.description, Tags: []string{"kube-reclaim"},
		SchemaVersion: 39, Refresh: "30s", Time: gTime{From: "now-6h", To: "now"},
		Templating: gTemplating{List: d.variables(ds)}}
	id, y := 1, 0
	for _, r := range d.rows {
		g.Panels = append(g.Panels, gPanel{ID: id, Type: "row", Title: r.title, GridPos: gGridPos{H: 1, W: 24, Y: y}})
		id++
		y++
		w := 24 / len(r.panels)
		h := 8
		if r.panels[0].stat {
			h = 4
		}
		for i, p := range r.panels {
			gp := gPanel{ID: id, Type: "timeseries", Title: p.title, Description: p.description, Datasource: ds,
				GridPos: gGridPos{H: h, W: w, X: i * w, Y: y}, FieldConfig: &gFieldConfig{Defaults: gDefaults{Unit: p.unit}}}
			if p.stat {
				gp.Type = "stat"
			}
			for j, q := range p.queries {
				gp.Targets = append(gp.Targets, gTarget{RefID: string(rune('A' + j)), Datasource: ds, Expr: q.expr, LegendFormat: q.legend})
			}
			g.Panels = append(g.Panels, gp)
			id++
		}
		y += h
	}
	return g
}
