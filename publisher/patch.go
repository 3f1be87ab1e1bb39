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

func (p *Publisher) patchAnnotation(ctx context.Context, w write) error {
	body, err := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"annotations": map[string]string{p.names.Annotation: w.annotation}},
	})
	if err != nil {
		return err
	}
	_, err = p.client.CoreV1().Nodes().Patch(ctx, w.node, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "kube-reclaim-publisher"})
	return err
}

// patchStatus writes the floor into capacity and allocatable alike: kubelet
// recomputes allocatable = capacity - reservation for every key, so unequal
// values would make it re-patch on every status update. With the webhook
// installed, this patch goes through it too and the same rule applies.
func (p *Publisher) patchStatus(ctx context.Context, w write) error {
	vals := map[string]string{string(p.names.CPU): quantity(w.floor.CPUMilli), string(p.names.Memory): quantity(w.floor.MemoryBytes)}
	body, err := json.Marshal(map[string]interface{}{
		"status": map[string]interface{}{"capacity": vals, "allocatable": vals},
	})
	if err != nil {
		return err
	}
	_, err = p.client.CoreV1().Nodes().Patch(ctx, w.node, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "kube-reclaim-publisher"}, "status")
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
