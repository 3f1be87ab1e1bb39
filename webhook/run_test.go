package webhook

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/kube-reclaim/kube-reclaim/internal/serving/servingtest"
	"github.com/kube-reclaim/kube-reclaim/test/heldwatch"
)

// Run waits for every part, so its return shows that the admission
// server's failure stopped the health server and the certificate reloader,
// which would otherwise run until ctx ends; the health address is then free.
func TestRunReturnsTheFirstFailureOnceEveryPartStopped(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	certFile, keyFile := writeCertPair(t, t.TempDir(), 42)
	o := NewOptions()
	o.TLSCertFile, o.TLSKeyFile = certFile, keyFile
	o.PublisherLeaseName = "" // no cluster needed
	o.ListenAddress, o.HealthAddress, o.MetricsAddress = busy.Addr().String(), servingtest.FreeAddr(t), ""
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	w, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			t.Errorf("Run = %v, want the admission server's bind error", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not stop after its admission server failed")
	}
	ln, err := net.Listen("tcp", o.HealthAddress)
	if err != nil {
		t.Fatalf("the health server still holds %s: %v", o.HealthAddress, err)
	}
	ln.Close()
}

// Run returns only once its informers have stopped: a namespace watch of
// the profile rewriter whose Stop is held keeps Run from returning until it
// is released.
func TestRunReturnsOnlyAfterItsInformersStopped(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeCertPair(t, dir, 42)
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte("apiVersion: kube-reclaim.io/v1alpha1\nkind: ReclaimPolicy\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := NewOptions()
	o.TLSCertFile, o.TLSKeyFile, o.ConfigFile = certFile, keyFile, policyFile
	o.Kubeconfig = servingtest.UnreachableKubeconfig(t) // the fake client below replaces its client
	o.PublisherLeaseName = ""
	o.ListenAddress, o.HealthAddress, o.MetricsAddress = servingtest.FreeAddr(t), servingtest.FreeAddr(t), ""
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	w, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	held := heldwatch.New()
	client.PrependWatchReactor("namespaces", held.Reactor(client.Tracker()))
	w.client = client
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	held.CheckRunWaits(t, cancel, done)
}
