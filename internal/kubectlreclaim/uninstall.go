package kubectlreclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// uninstallFlags are the flags of kubectl reclaim uninstall.
type uninstallFlags struct {
	stalenessFlags
	DryRun bool
	Force  bool
	// Workers bounds the node patches in flight.
	Workers int
}

// UninstallReport is what kubectl reclaim uninstall did (or would do).
type UninstallReport struct {
	DryRun bool `json:"dryRun"`
	// Nodes lists every node that carried something of kube-reclaim, with
	// what was removed from it.
	Nodes []UninstalledNode `json:"nodes"`
	// NodesSeen is how many nodes were looked at.
	NodesSeen int `json:"nodesSeen"`
	// BatchPods are the pods still asking for reclaimed resources that are
	// bound to a node and not finished: kube-reclaim no longer guards them.
	BatchPods []string `json:"batchPods"`
}

// UninstalledNode is one node cleaned up.
type UninstalledNode struct {
	Name       string `json:"name"`
	Annotation bool   `json:"annotation"`
	// StatusKeys are the reclaimed resources removed from status.capacity
	// and status.allocatable.
	StatusKeys []string `json:"statusKeys,omitempty"`
}

func newUninstallCommand(o *Options) *cobra.Command {
	u := &uninstallFlags{stalenessFlags: defaultStaleness(), Workers: 8}
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what kube-reclaim left on the nodes, after kubectl delete -k",
		Long: `kubectl reclaim uninstall removes, from every node, the reclaimable annotation
and the reclaimed resources (<domain>/reclaimed-cpu and -memory) from
status.capacity and status.allocatable. Run it after kubectl delete -k: kubelet
keeps extended resources it did not add, so without it every node goes on
advertising reclaimed capacity that nobody measures any more, and the default
scheduler would place pods asking for it.

It refuses while kube-reclaim still runs (a node-status webhook is registered,
or the publisher renewed its Lease lately), because the webhook would put the
resources back on the next kubelet heartbeat; --force skips that check.

Pods still running on reclaimed resources keep running under the limits they
were given: kubelet ignores resources a node no longer lists, also when it
restarts, and nothing evicts them any more. They are listed; delete them if they
should not outlive kube-reclaim. Pods asking for reclaimed resources that are
not placed yet stay Pending.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			errs := o.validateCommon()
			errs = append(errs, u.validate()...)
			if u.Workers < 1 {
				errs = append(errs, fmt.Errorf("--workers: %d must be at least 1", u.Workers))
			}
			if err := errors.Join(errs...); err != nil {
				return err
			}
			names, _ := o.names()
			c, err := o.clients()
			if err != nil {
				return err
			}
			r, err := uninstall(cmd.Context(), c, names, u, o)
			if r != nil {
				printUninstall(o, r)
			}
			return err
		},
	}
	fs := cmd.Flags()
	u.addFlags(fs)
	fs.BoolVar(&u.DryRun, "dry-run", false, "Print what would be removed; change nothing.")
	fs.BoolVar(&u.Force, "force", false, "Clean up even while a node-status webhook is registered or the publisher's Lease is alive.")
	fs.IntVar(&u.Workers, "workers", u.Workers, "Nodes patched at once.")
	return cmd
}

// stillRunning says what of kube-reclaim is still installed: the
// publisher's live Lease and any webhook that mutates nodes/status.
func stillRunning(ctx context.Context, c Clients, u *uninstallFlags, o *Options) ([]string, error) {
	var found []string
	if u.PublisherLeaseName != "" {
		lease, err := u.leaderLease(ctx, c.Kube, o.Now())
		if err != nil {
			return nil, err
		}
		if lease != nil && lease.Alive {
			found = append(found, fmt.Sprintf("the publisher's Lease %s/%s is alive (%s)", lease.Namespace, lease.Name, lease.Detail))
		}
	}
	list, err := c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing MutatingWebhookConfigurations: %w", err)
	}
	for i := range list.Items {
		if mutatesNodeStatus(&list.Items[i]) {
			found = append(found, "MutatingWebhookConfiguration "+list.Items[i].Name+" mutates nodes/status")
		}
	}
	return found, nil
}

func mutatesNodeStatus(cfg *admissionregistrationv1.MutatingWebhookConfiguration) bool {
	for _, w := range cfg.Webhooks {
		for _, r := range w.Rules {
			if (slices.Contains(r.APIGroups, "") || slices.Contains(r.APIGroups, "*")) &&
				(slices.Contains(r.Resources, "nodes/status") || slices.Contains(r.Resources, "*/status") ||
					slices.Contains(r.Resources, "*/*") || slices.Contains(r.Resources, "nodes/*")) {
				return true
			}
		}
	}
	return false
}

func uninstall(ctx context.Context, c Clients, names reclaimable.Names, u *uninstallFlags, o *Options) (*UninstallReport, error) {
	if !u.Force {
		found, err := stillRunning(ctx, c, u, o)
		if err != nil {
			return nil, err
		}
		if len(found) > 0 {
			return nil, fmt.Errorf("kube-reclaim still runs: %s; run kubectl delete -k first (or pass --force)", strings.Join(found, "; "))
		}
	}
	r := &UninstallReport{DryRun: u.DryRun, Nodes: []UninstalledNode{}, BatchPods: []string{}}
	var todo []UninstalledNode
	err := c.pager(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return c.Kube.CoreV1().Nodes().List(ctx, opts)
	}).EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		n := obj.(*corev1.Node)
		r.NodesSeen++
		if un, ok := leftOn(n, names); ok {
			todo = append(todo, un)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	if u.DryRun {
		r.Nodes = todo
	} else {
		var mu sync.Mutex
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(u.Workers)
		for _, un := range todo {
			g.Go(func() error {
				if err := cleanNode(gctx, c, names, un); err != nil {
					return fmt.Errorf("node %s: %w", un.Name, err)
				}
				mu.Lock()
				r.Nodes = append(r.Nodes, un)
				mu.Unlock()
				return nil
			})
		}
		err = g.Wait()
		slices.SortFunc(r.Nodes, func(a, b UninstalledNode) int { return strings.Compare(a.Name, b.Name) })
		if err != nil {
			return r, err
		}
	}
	err = c.pager(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return c.Kube.CoreV1().Pods("").List(ctx, opts)
	}).EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		p := obj.(*corev1.Pod)
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			return nil
		}
		if req, _ := names.PodRequest(p); !req.IsZero() {
			r.BatchPods = append(r.BatchPods, p.Namespace+"/"+p.Name)
		}
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("listing pods: %w", err)
	}
	return r, nil
}

// leftOn reports what kube-reclaim left on n.
func leftOn(n *corev1.Node, names reclaimable.Names) (UninstalledNode, bool) {
	un := UninstalledNode{Name: n.Name}
	_, un.Annotation = n.Annotations[names.Annotation]
	for _, k := range []corev1.ResourceName{names.CPU, names.Memory} {
		_, inCap := n.Status.Capacity[k]
		_, inAlloc := n.Status.Allocatable[k]
		if inCap || inAlloc {
			un.StatusKeys = append(un.StatusKeys, string(k))
		}
	}
	return un, un.Annotation || len(un.StatusKeys) > 0
}

// cleanNode removes the annotation and the reclaimed status keys with merge
// patches: a null removes a key and is a no-op when the key is gone already,
// so a second run, or a node cleaned in between, is not an error.
func cleanNode(ctx context.Context, c Clients, names reclaimable.Names, un UninstalledNode) error {
	nodes := c.Kube.CoreV1().Nodes()
	if len(un.StatusKeys) > 0 {
		keys := map[string]any{}
		for _, k := range un.StatusKeys {
			keys[k] = nil
		}
		patch, err := json.Marshal(map[string]any{"status": map[string]any{"capacity": keys, "allocatable": keys}})
		if err != nil {
			return err
		}
		if _, err := nodes.Patch(ctx, un.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing %s from status: %w", strings.Join(un.StatusKeys, ", "), err)
		}
	}
	if un.Annotation {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{names.Annotation: nil}}})
		if err != nil {
			return err
		}
		if _, err := nodes.Patch(ctx, un.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing annotation %s: %w", names.Annotation, err)
		}
	}
	return nil
}

func printUninstall(o *Options, r *UninstallReport) {
	w := o.Streams.Out
	verb := "cleaned"
	if r.DryRun {
		verb = "would clean"
	}
	for _, n := range r.Nodes {
		var what []string
		if n.Annotation {
			what = append(what, "annotation")
		}
		what = append(what, n.StatusKeys...)
		fmt.Fprintf(w, "node/%s %s: %s\n", escapeControl(n.Name), verb, strings.Join(what, ", "))
	}
	fmt.Fprintf(w, "%s %d of %d nodes\n", verb, len(r.Nodes), r.NodesSeen)
	if len(r.BatchPods) > 0 {
		fmt.Fprintf(w, "%d pods still run on reclaimed resources under the limits they were given; nothing evicts them any more:\n", len(r.BatchPods))
		for _, p := range r.BatchPods {
			fmt.Fprintf(w, "  %s\n", escapeControl(p))
		}
	}
}
