package promserver

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"sigs.k8s.io/yaml"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
)

// ProcessName is the name the cluster knows the server by (its log is
// <cluster dir>/prometheus.log).
const ProcessName = "prometheus"

// Config is what the server runs with.
type Config struct {
	// ScrapeInterval and EvaluationInterval are the global defaults.
	ScrapeInterval, EvaluationInterval string
	// DiscoveryReloadInterval is how often the scrape manager applies what
	// service discovery found (--scrape.discovery-reload-interval; empty:
	// Prometheus's 5s): a pod gone stops being scraped, and its series go
	// stale, at the next reload.
	DiscoveryReloadInterval string
	ScrapeConfigs           []ScrapeConfig
	// RuleFiles are the rules files by file name.
	RuleFiles map[string][]byte
	// Files are written as they are (absolute path -> content), with mode
	// 0600: the credentials and CAs a Translation refers to.
	Files map[string][]byte
}

// Server is a running Prometheus.
type Server struct {
	URL string
	API promv1.API
}

// Start writes cfg into dir and runs the Prometheus binary bin there under
// c's supervision (stopped with the cluster), listening on 127.0.0.1 only,
// and waits until it is ready.
func Start(ctx context.Context, c *cluster.Cluster, bin, dir string, cfg Config) (*Server, error) {
	for path, data := range cfg.Files {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	ruleFiles := make([]string, 0, len(cfg.RuleFiles))
	for name, data := range cfg.RuleFiles {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return nil, err
		}
		ruleFiles = append(ruleFiles, path)
	}
	sort.Strings(ruleFiles)
	main := map[string]any{
		"global": map[string]any{
			"scrape_interval":     cfg.ScrapeInterval,
			"scrape_timeout":      cfg.ScrapeInterval,
			"evaluation_interval": cfg.EvaluationInterval,
		},
		"rule_files":     ruleFiles,
		"scrape_configs": cfg.ScrapeConfigs,
	}
	data, err := yaml.Marshal(main)
	if err != nil {
		return nil, err
	}
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, data, 0o644); err != nil {
		return nil, err
	}
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := []string{"--config.file=" + configFile, "--storage.tsdb.path=" + filepath.Join(dir, "data"), "--web.listen-address=" + addr}
	if cfg.DiscoveryReloadInterval != "" {
		args = append(args, "--scrape.discovery-reload-interval="+cfg.DiscoveryReloadInterval)
	}
	if err := c.StartProcess(ProcessName, bin, args...); err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + addr}
	client, err := promapi.NewClient(promapi.Config{Address: s.URL})
	if err != nil {
		return nil, err
	}
	s.API = promv1.NewAPI(client)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if p := c.Process(ProcessName); p == nil || !p.Running() {
			return nil, fmt.Errorf("prometheus exited:\n%s", tail(c))
		}
		if ready(ctx, s.URL) {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("prometheus not ready within a minute:\n%s", tail(c))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func ready(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/-/ready", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func tail(c *cluster.Cluster) string {
	if p := c.Process(ProcessName); p != nil {
		return p.Tail(3000)
	}
	return "(not started)"
}
