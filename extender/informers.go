package extender

import (
	"context"
	"fmt"
	"sync"
	"unique"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/internal/compactlist"
	"github.com/kube-reclaim/kube-reclaim/internal/policyinput"
	"github.com/kube-reclaim/kube-reclaim/internal/watchhealth"
	"github.com/kube-reclaim/kube-reclaim/placement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// podRecord is all the pod informer keeps of a pod: about 100 bytes instead
// of the kilobytes of a *corev1.Pod, which matters at 150,000 pods. It is
// made inside the informer's ListerWatcher (compactlist), so the store, the
// event handlers and bind's lookups only ever see records.
type podRecord struct {
	namespace, name string
	uid             types.UID
	// resourceVersion is read by the reflector from watch bookmarks.
	resourceVersion string
	nodeName        string
	// schedulerName is spec.schedulerName: bind places only pods of the
	// schedulers it serves.
	schedulerName string
	req           reclaimable.Resources
	mismatch      bool
	terminal      bool
	// unenforced says what the pod lacks of the limits the pod webhook
	// sets (enforcement.Enforced); empty when it lacks nothing.
	unenforced string
	// created is the pod's creation time in Unix seconds (0: not set), for
	// the age of Pending reclaimed pods (pendingCollector).
	created int64
}

// pod is what the placement cache keeps of the pod.
func (p *podRecord) pod() placement.Pod {
	return placement.Pod{UID: p.uid, NodeName: p.nodeName, Req: p.req, Terminal: p.terminal}
}

// GetObjectMeta lets cache.MetaNamespaceKeyFunc key the record.
func (p *podRecord) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: p.namespace, Name: p.name, UID: p.uid, ResourceVersion: p.resourceVersion}
}

// GetObjectKind and DeepCopyObject make the record a runtime.Object, which
// the reflector requires of what compactlist hands it.
func (p *podRecord) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the record; it holds no pointers.
func (p *podRecord) DeepCopyObject() runtime.Object { c := *p; return &c }

// nodeRecord is all the node informer keeps of a node (a Node with its
// images and conditions is kilobytes).
type nodeRecord struct {
	name            string
	resourceVersion string
	annotation      string
	present         bool
	// allocatable is the node's native allocatable CPU (millicores) and
	// memory (bytes): no annotated value may exceed it.
	allocatable reclaimable.Resources
}

// node is what the placement cache keeps of the node.
func (n *nodeRecord) node() placement.Node {
	return placement.Node{Name: n.name, Annotation: n.annotation, Present: n.present, Allocatable: n.allocatable}
}

// GetObjectMeta lets cache.MetaNamespaceKeyFunc key the record.
func (n *nodeRecord) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: n.name, ResourceVersion: n.resourceVersion}
}

// GetObjectKind makes the record a runtime.Object, with DeepCopyObject.
func (n *nodeRecord) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the record; it holds no pointers.
func (n *nodeRecord) DeepCopyObject() runtime.Object { c := *n; return &c }

// intern shares the backing memory of strings repeated across pods
// (namespaces, node names).
func intern(s string) string { return unique.Make(s).Value() }

// newPodRecord strips a pod to what the extender needs.
func newPodRecord(n reclaimable.Names, p *corev1.Pod) *podRecord {
	req, mismatch := n.PodRequest(p)
	r := &podRecord{namespace: intern(p.Namespace), name: p.Name, uid: p.UID, resourceVersion: p.ResourceVersion,
		req: req, mismatch: mismatch,
		terminal: p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed}
	if !p.CreationTimestamp.IsZero() {
		r.created = p.CreationTimestamp.Unix()
	}
	if p.Spec.NodeName != "" {
		r.nodeName = intern(p.Spec.NodeName)
	}
	if p.Spec.SchedulerName != "" {
		r.schedulerName = intern(p.Spec.SchedulerName)
	}
	if !req.IsZero() && !mismatch {
		if err := enforcement.Enforced(&p.Spec, n); err != nil {
			// Pods of one template lack the same: keep their text once.
			r.unenforced = intern(notEnforcedMessage(err))
		}
	}
	return r
}

// podRecords converts the pods compactlist reads into records; anything
// else keeps its type.
func podRecords(n reclaimable.Names) compactlist.Convert {
	return func(obj runtime.Object) runtime.Object {
		if p, ok := obj.(*corev1.Pod); ok {
			return newPodRecord(n, p)
		}
		return obj
	}
}

func nodeRecords(n reclaimable.Names) compactlist.Convert {
	return func(obj runtime.Object) runtime.Object {
		if node, ok := obj.(*corev1.Node); ok {
			v, present := node.Annotations[n.Annotation]
			return &nodeRecord{name: node.Name, resourceVersion: node.ResourceVersion, annotation: v, present: present, allocatable: placement.NativeAllocatable(node)}
		}
		return obj
	}
}

// notEnforcedMessage explains why a reclaimed pod without the pod webhook's
// limits is refused: err (from enforcement.Enforced) names each container
// and what it lacks. The same text goes to every node of a filter call, so
// the FailedScheduling event shows it once.
func notEnforcedMessage(err error) string {
	return err.Error() + " (refused by the extender's --require-enforced: without native limits kubelet would not hold the pod to its grant)"
}

// informers are the node and pod informers feeding a nodeCache, and what
// sees their list and watch calls (liveness).
type informers struct {
	nodes, pods         cache.SharedIndexInformer
	nodeWatch, podWatch *watchhealth.Watch
}

func newInformers(client kubernetes.Interface, n reclaimable.Names, c *placement.Cache) (*informers, error) {
	// Both informers are fed records through compactlist: listing 150,000
	// pods never holds more than a page of full Pods.
	podLW := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			// As kube-scheduler's own pod informer: finished pods free their
			// room, and leaving them out keeps completed batch pods out of
			// memory. A pod that finishes leaves the watch as a deletion.
			o.FieldSelector = policyinput.NonTerminalPods
			return client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = policyinput.NonTerminalPods
			return client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, o)
		},
	}
	nodeLW := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().Nodes().Watch(ctx, o)
		},
	}
	inf := &informers{nodeWatch: watchhealth.New("nodes", watchhealth.DefaultStall), podWatch: watchhealth.New("pods", watchhealth.DefaultStall)}
	inf.pods = cache.NewSharedIndexInformerWithOptions(inf.podWatch.ListerWatcher(compactlist.New(podLW, podRecords(n))), &podRecord{},
		cache.SharedIndexInformerOptions{ObjectDescription: "pods", Indexers: cache.Indexers{pendingIndex: pendingReclaimed}})
	inf.nodes = cache.NewSharedIndexInformerWithOptions(inf.nodeWatch.ListerWatcher(compactlist.New(nodeLW, nodeRecords(n))), &nodeRecord{},
		cache.SharedIndexInformerOptions{ObjectDescription: "nodes"})
	if _, err := inf.pods.AddEventHandler(podHandlers(c)); err != nil {
		return nil, err
	}
	if _, err := inf.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { withNode(obj, func(n *nodeRecord) { c.SetNode(n.node()) }) },
		UpdateFunc: func(_, obj interface{}) { withNode(obj, func(n *nodeRecord) { c.SetNode(n.node()) }) },
		DeleteFunc: func(obj interface{}) { withNode(obj, func(n *nodeRecord) { c.DeleteNode(n.name) }) },
	}); err != nil {
		return nil, err
	}
	return inf, nil
}

// podHandlers applies the pod informer's events to c.
func podHandlers(c *placement.Cache) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { withPod(obj, func(p *podRecord) { c.SetPod(p.pod()) }) },
		UpdateFunc: func(oldObj, obj interface{}) {
			withPod(obj, func(p *podRecord) {
				// The informer keys pods by namespace/name: after a relist, a
				// pod deleted and recreated under its name while the watch was
				// down (a StatefulSet's) comes as an update of the old pod,
				// whose deletion never comes. The cache is keyed by UID.
				if old, ok := oldObj.(*podRecord); ok && old.uid != p.uid {
					c.DeletePod(old.uid)
				}
				c.SetPod(p.pod())
			})
		},
		DeleteFunc: func(obj interface{}) { withPod(obj, func(p *podRecord) { c.DeletePod(p.uid) }) },
	}
}

func withPod(obj interface{}, f func(*podRecord)) { withRecord(obj, "pod", f) }

func withNode(obj interface{}, f func(*nodeRecord)) { withRecord(obj, "node", f) }

// withRecord calls f with the record an informer of kind delivered, the
// last known state of a deleted object included.
func withRecord[T any](obj interface{}, kind string, f func(T)) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if r, ok := obj.(T); ok {
		f(r)
		return
	}
	logrus.WithField("type", typeName(obj)).Error(kind + " informer delivered an unexpected object")
}

func typeName(obj interface{}) string { return fmt.Sprintf("%T", obj) }

// run starts both informers in wg; they stop when ctx ends.
func (i *informers) run(ctx context.Context, wg *sync.WaitGroup) {
	wg.Go(func() { i.nodeWatch.Run(ctx, i.nodes) })
	wg.Go(func() { i.podWatch.Run(ctx, i.pods) })
}

// check is the informers' liveness (watchhealth.Watch.Check).
func (i *informers) check() error { return watchhealth.Checks(i.nodeWatch, i.podWatch)() }

func (i *informers) hasSynced() bool { return i.nodes.HasSynced() && i.pods.HasSynced() }

// pod returns the informer's record of namespace/name.
func (i *informers) pod(namespace, name string) (*podRecord, bool) {
	obj, ok, err := i.pods.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	p, ok := obj.(*podRecord)
	return p, ok
}
