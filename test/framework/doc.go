// Package framework holds what the integration and end-to-end suites share
// when they drive the local cluster of test/cluster: starting a kube-reclaim
// role and waiting for it, reading its Prometheus metrics, polling, reading
// nodes and pods as the tests see them, the apiserver audit log, and
// observing a window during which something must not happen.
//
// It takes a *cluster.Cluster and a testing.TB and never starts a cluster of
// its own: each suite decides how many clusters it runs.
package framework
