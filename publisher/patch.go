package publisher

import (
	"context"
	"encoding/json"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// nodePatch is the one merge patch of a publish. It goes to the nodes/status
// subresource even when it carries only the annotation: kube-apiserver keeps
// metadata changes made through a Node's status (checked by TestPublisher),
// so the annotation and the floor land in one write, one
// resourceVersion and one webhook review, and the webhook floors the status
// from the annotation of that very write.
type nodePatch struct {
	Metadata *patchMetadata `json:"metadata,omitempty"`
	Status   *patchStatus   `json:"status,omitempty"`
}

type patchMetadata struct {
	Annotations map[string]string `json:"annotations"`
}

// patchStatus writes the floor into capacity and allocatable alike: kubelet
// recomputes allocatable = capacity - reservation for every key, so unequal
// values would make it re-patch on every status update. With the webhook
// installed, this patch goes through it too and the same rule applies.
type patchStatus struct {
	Capacity    map[string]string `json:"capacity"`
	Allocatable map[string]string `json:"allocatable"`
}

// body is the merge patch for w.
func (p *Publisher) patchBody(w write) ([]byte, error) {
	var np nodePatch
	if w.annotation != "" {
		np.Metadata = &patchMetadata{Annotations: map[string]string{p.names.Annotation: w.annotation}}
	}
	if w.status {
		vals := map[string]string{string(p.names.CPU): quantity(w.floor.CPUMilli), string(p.names.Memory): quantity(w.floor.MemoryBytes)}
		np.Status = &patchStatus{Capacity: vals, Allocatable: vals}
	}
	return json.Marshal(np)
}

func (p *Publisher) patchNode(ctx context.Context, w write) error {
	body, err := p.patchBody(w)
	if err != nil {
		return err
	}
	_, err = p.client.CoreV1().Nodes().Patch(ctx, w.node, types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: "kube-reclaim-publisher"}, "status")
	return err
}

// retryWrite retries transient API errors with exponential backoff until ctx
// ends. A deleted node is not an error worth retrying.
func retryWrite(ctx context.Context, f func(context.Context) error) error {
	var last error
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 6, Cap: 3 * time.Second}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		last = f(ctx)
		switch {
		case last == nil:
			return true, nil
		case apierrors.IsNotFound(last), apierrors.IsInvalid(last), apierrors.IsForbidden(last), apierrors.IsBadRequest(last):
			return false, last
		}
		return false, nil
	})
	if err != nil && last != nil {
		return last
	}
	return err
}

func metav1ObjectMetaNamed(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}
