// Package e2e holds the end-to-end tests of kube-reclaim: the whole pipeline
// (publisher, webhook and extender as real processes configured the way
// deploy/ configures them, a real kube-apiserver, kube-scheduler,
// controller-manager, kwok as the kubelet of every node and metrics-server)
// on one local cluster from test/cluster, under faults and bad input; and a
// real Prometheus scraping kube-reclaim installed from deploy/ onto a real
// node, evaluating the shipped rules under faults (prometheus_test.go). No
// fakes.
//
// Run it with
//
//	go test ./test/e2e/ -v -count=1 -timeout 40m
//
// It takes many minutes (docs/CONVENTIONS.md has a timed run). -short skips the long tests (the
// usage trace and the fault tests that wait out real timeouts) and keeps
// the extender, burst, bad-input and eviction tests.
package e2e
