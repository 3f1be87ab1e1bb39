// Package benchfixture holds the inputs and yardsticks of the webhook and
// extender benchmarks and of the load command (hack/bench): a realistic
// kubelet heartbeat review, the do-nothing baseline handler the webhook is
// measured against, and a ResponseWriter that costs nothing. Only tests and
// hack/ import it; the product packages keep nothing that only benchmarks use.
package benchfixture

import (
	"encoding/json"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// SampleReviewUID is the request UID of RealisticReview.
const SampleReviewUID = "7f3c2a1e-5b8d-4c6f-9a0e-1d2b3c4d5e6f"

// RealisticNode returns a node shaped like a real kubelet-managed worker: a
// dozen labels, the usual annotations including a fresh reclaimable
// annotation (written a minute before now, 2500 millicores and 6 GiB, with
// its explanation), kubelet's managedFields, five conditions, and 50 container
// images. When needsPatch is false its status already carries the annotated
// reclaimed values, so the webhook has nothing to change (the common
// heartbeat); when true the status carries older values and the webhook
// answers with a four-operation patch.
func RealisticNode(names reclaimable.Names, now time.Time, needsPatch bool) *corev1.Node {
	ann := reclaimable.Annotation{
		CPUMilli: 2500, MemoryBytes: 6 << 30, Policy: "usage",
		MetricsTime: now.Add(-90 * time.Second).UTC().Truncate(time.Second),
		WriteTime:   now.Add(-time.Minute).UTC().Truncate(time.Second),
		Explanation: &reclaimable.Explanation{
			CPU: reclaimable.ResourceExplanation{Result: 2500, Terms: []reclaimable.Term{
				{Name: "allocatable", Value: 7910}, {Name: "margin", Value: -791, Note: "10%"},
				{Name: "regular-peak-usage", Value: -4219, Note: "p95 over 5m0s of 20 samples"},
				{Name: "unmeasured-requests", Value: -400}}},
			Memory: reclaimable.ResourceExplanation{Result: 6 << 30, Terms: []reclaimable.Term{
				{Name: "allocatable", Value: 31 << 30}, {Name: "margin", Value: -(3 << 30), Note: "10%"},
				{Name: "regular-peak-usage", Value: -(20 << 30), Note: "p95 over 5m0s of 20 samples"},
				{Name: "unmeasured-requests", Value: -(2 << 30)}}},
		},
	}
	annValue, err := ann.Marshal()
	if err != nil {
		panic(err)
	}
	reclaimedCPU, reclaimedMem := "2500", fmt.Sprint(int64(6<<30))
	if needsPatch {
		reclaimedCPU, reclaimedMem = "1800", fmt.Sprint(int64(5<<30))
	}
	name := "ip-10-20-31-142.eu-west-1.compute.internal"
	rl := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse(cpu),
			corev1.ResourceMemory:           resource.MustParse(mem),
			corev1.ResourceEphemeralStorage: resource.MustParse("104845292Ki"),
			corev1.ResourcePods:             resource.MustParse("110"),
			"hugepages-1Gi":                 resource.MustParse("0"),
			"hugepages-2Mi":                 resource.MustParse("0"),
			"attachable-volumes-aws-ebs":    resource.MustParse("25"),
			names.CPU:                       resource.MustParse(reclaimedCPU),
			names.Memory:                    resource.MustParse(reclaimedMem),
		}
	}
	t := metav1.NewTime(now.Add(-30 * 24 * time.Hour).UTC().Truncate(time.Second))
	hb := metav1.NewTime(now.UTC().Truncate(time.Second))
	cond := func(typ corev1.NodeConditionType, status corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: status, LastHeartbeatTime: hb, LastTransitionTime: t, Reason: reason, Message: msg}
	}
	images := make([]corev1.ContainerImage, 50)
	for i := range images {
		repo := fmt.Sprintf("registry.internal.example.com/team-%02d/service-%02d", i%7, i)
		images[i] = corev1.ContainerImage{
			Names: []string{
				fmt.Sprintf("%s@sha256:%064x", repo, uint64(i+1)*0x9e3779b97f4a7c15),
				fmt.Sprintf("%s:v1.%d.%d", repo, i%13, i),
			},
			SizeBytes: int64(50+i*7) << 20,
		}
	}
	fieldsV1 := `{"f:metadata":{"f:annotations":{".":{},"f:node.alpha.kubernetes.io/ttl":{},"f:volumes.kubernetes.io/controller-managed-attach-detach":{}},"f:labels":{".":{},"f:beta.kubernetes.io/arch":{},"f:beta.kubernetes.io/instance-type":{},"f:beta.kubernetes.io/os":{},"f:kubernetes.io/arch":{},"f:kubernetes.io/hostname":{},"f:kubernetes.io/os":{},"f:node.kubernetes.io/instance-type":{},"f:topology.kubernetes.io/region":{},"f:topology.kubernetes.io/zone":{}}},"f:spec":{"f:providerID":{}}}`
	statusFields := `{"f:status":{"f:allocatable":{"f:attachable-volumes-aws-ebs":{},"f:cpu":{},"f:ephemeral-storage":{},"f:memory":{}},"f:capacity":{"f:attachable-volumes-aws-ebs":{},"f:cpu":{},"f:ephemeral-storage":{},"f:memory":{}},"f:conditions":{"k:{\"type\":\"DiskPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"MemoryPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"PIDPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"Ready\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{}}},"f:images":{},"f:nodeInfo":{"f:bootID":{},"f:kernelVersion":{}}}}`
	return &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID("4c1a2f9e-8d7b-4e6a-b5c4-3d2e1f0a9b8c"), ResourceVersion: "48213377",
			CreationTimestamp: t,
			Labels: map[string]string{
				"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/instance-type": "m5.2xlarge",
				"beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
				"kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "m5.2xlarge",
				"topology.kubernetes.io/region": "eu-west-1", "topology.kubernetes.io/zone": "eu-west-1b",
				"eks.amazonaws.com/nodegroup": "batch-pool", "eks.amazonaws.com/capacityType": "ON_DEMAND",
				"pool": "batch",
			},
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				"alpha.kubernetes.io/provided-node-ip":                   "10.20.31.142",
				"csi.volume.kubernetes.io/nodeid":                        `{"ebs.csi.aws.com":"i-0a1b2c3d4e5f60718"}`,
				names.Annotation:                                         annValue,
			},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &t,
					FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fieldsV1)}},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &hb,
					FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(statusFields)}, Subresource: "status"},
			},
		},
		Spec: corev1.NodeSpec{ProviderID: "aws:///eu-west-1b/i-0a1b2c3d4e5f60718", PodCIDR: "10.244.17.0/24", PodCIDRs: []string{"10.244.17.0/24"}},
		Status: corev1.NodeStatus{
			Capacity:    rl("8", "32408200Ki"),
			Allocatable: rl("7910m", "31391368Ki"),
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
				cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "RouteCreated", "RouteController created a route"),
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "10.20.31.142"},
				{Type: corev1.NodeHostName, Address: name},
				{Type: corev1.NodeInternalDNS, Address: name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: "ec2b3c4d5e6f708192a3b4c5d6e7f809", SystemUUID: "ec2b3c4d-5e6f-7081-92a3-b4c5d6e7f809",
				BootID: "5d6e7f80-9a1b-4c2d-8e3f-4a5b6c7d8e9f", KernelVersion: "5.10.225-213.878.amzn2.x86_64",
				OSImage: "Amazon Linux 2", ContainerRuntimeVersion: "containerd://1.7.22", KubeletVersion: "v1.34.4",
				KubeProxyVersion: "v1.34.4", //nolint:staticcheck // real kubelets still report it; the sample must be as large as theirs
				OperatingSystem:  "linux", Architecture: "amd64",
			},
			Images: images,
		},
	}
}

// RealisticReview returns the bytes of an admission.k8s.io/v1 AdmissionReview
// of a kubelet heartbeat (UPDATE nodes/status) of RealisticNode: object and
// oldObject (the stored node, heartbeat 10 s earlier), about 33 KB. It is the
// input of the webhook benchmarks and of the load command.
func RealisticReview(names reclaimable.Names, now time.Time, needsPatch bool) []byte {
	obj := RealisticNode(names, now, needsPatch)
	old := obj.DeepCopy()
	for i := range old.Status.Conditions {
		old.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(now.Add(-10 * time.Second).UTC().Truncate(time.Second))
	}
	objRaw, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	oldRaw, err := json.Marshal(old)
	if err != nil {
		panic(err)
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:                SampleReviewUID,
			Kind:               metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
			Resource:           metav1.GroupVersionResource{Version: "v1", Resource: "nodes"},
			SubResource:        "status",
			RequestKind:        &metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
			RequestResource:    &metav1.GroupVersionResource{Version: "v1", Resource: "nodes"},
			RequestSubResource: "status",
			Name:               obj.Name,
			Operation:          admissionv1.Update,
			UserInfo: authenticationv1.UserInfo{
				Username: "system:node:" + obj.Name,
				Groups:   []string{"system:nodes", "system:authenticated"},
			},
			Object:    runtime.RawExtension{Raw: objRaw},
			OldObject: runtime.RawExtension{Raw: oldRaw},
			Options:   runtime.RawExtension{Raw: []byte(`{"kind":"UpdateOptions","apiVersion":"meta.k8s.io/v1","fieldManager":"kubelet"}`)},
		},
	}
	b, err := json.Marshal(review)
	if err != nil {
		panic(err)
	}
	return b
}
