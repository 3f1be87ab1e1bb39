package cluster

import (
	"fmt"
	"time"
)

// kwokConfig renders kwok's --config: its options, the node stages that make
// it behave like a kubelet (initialise, then PATCH nodes/status every
// heartbeat interval), and the resource-metrics endpoint metrics-server scrapes.
//
// Listing any node stage drops kwok's default node stages, so initialisation
// is listed too. Pod stages stay kwok's defaults.
func kwokConfig(heartbeat time.Duration, leaseSeconds int) string {
	// kwok waits a random time between durationMilliseconds and
	// jitterDurationMilliseconds: an interval plus up to half of it.
	delay := heartbeat.Milliseconds()
	jitter := delay + delay/2
	return fmt.Sprintf(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  nodeLeaseDurationSeconds: %[3]d
  nodeLeaseParallelism: 16
  nodePlayStageParallelism: 16
  podPlayStageParallelism: 16
  enablePodsOnNodeSyncStreamWatch: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $now | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
      addresses:
      {{ with NodeIP }}
      - address: {{ . | Quote }}
        type: InternalIP
      {{ end }}
      {{ with NodeName }}
      - address: {{ . | Quote }}
        type: Hostname
      {{ end }}
      {{ with NodePort }}
      daemonEndpoints:
        kubeletEndpoint:
          Port: {{ . }}
      {{ end }}
      nodeInfo:
        architecture: amd64
        operatingSystem: linux
        kubeletVersion: {{ printf "kwok-%%s" Version | Quote }}
        kubeProxyVersion: {{ printf "kwok-%%s" Version | Quote }}
        containerRuntimeVersion: {{ printf "kwok-%%s" Version | Quote }}
        kernelVersion: {{ printf "kwok-%%s" Version | Quote }}
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-heartbeat
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'In'
      values: ['True']
  delay:
    durationMilliseconds: %[1]d
    jitterDurationMilliseconds: %[2]d
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      {{ range .status.conditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ .lastTransitionTime | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Metric
metadata:
  name: metrics-resource
spec:
  path: /metrics/nodes/{nodeName}/metrics/resource
  metrics:
  - name: scrape_error
    dimension: node
    help: 1 if there was an error while getting container metrics, 0 otherwise
    kind: gauge
    value: '0'
  - name: container_start_time_seconds
    dimension: container
    help: Start time of the container since unix epoch in seconds
    kind: gauge
    labels:
    - {name: container, value: container.name}
    - {name: namespace, value: pod.metadata.namespace}
    - {name: pod, value: pod.metadata.name}
    value: pod.SinceSecond()
  - name: container_cpu_usage_seconds_total
    dimension: container
    help: Cumulative cpu time consumed by the container in core-seconds
    kind: counter
    labels:
    - {name: container, value: container.name}
    - {name: namespace, value: pod.metadata.namespace}
    - {name: pod, value: pod.metadata.name}
    value: pod.CumulativeUsage("cpu", container.name)
  - name: container_memory_working_set_bytes
    dimension: container
    help: Current working set of the container in bytes
    kind: gauge
    labels:
    - {name: container, value: container.name}
    - {name: namespace, value: pod.metadata.namespace}
    - {name: pod, value: pod.metadata.name}
    value: pod.Usage("memory", container.name)
  - name: pod_cpu_usage_seconds_total
    dimension: pod
    help: Cumulative cpu time consumed by the pod in core-seconds
    kind: counter
    labels:
    - {name: namespace, value: pod.metadata.namespace}
    - {name: pod, value: pod.metadata.name}
    value: pod.CumulativeUsage("cpu")
  - name: pod_memory_working_set_bytes
    dimension: pod
    help: Current working set of the pod in bytes
    kind: gauge
    labels:
    - {name: namespace, value: pod.metadata.namespace}
    - {name: pod, value: pod.metadata.name}
    value: pod.Usage("memory")
  # metrics-server drops a node whose usage is zero, so an empty node reports
  # a system baseline (NodeBaselineCPU / NodeBaselineMemory) on top of its pods.
  - name: node_cpu_usage_seconds_total
    dimension: node
    help: Cumulative cpu time consumed by the node in core-seconds
    kind: counter
    value: node.CumulativeUsage("cpu") + node.SinceSecond() * %[4]f
  - name: node_memory_working_set_bytes
    dimension: node
    help: Current working set of the node in bytes
    kind: gauge
    value: node.Usage("memory") + %[5]d.0
`, delay, jitter, leaseSeconds, float64(NodeBaselineCPUMilli)/1000, NodeBaselineMemoryBytes)
}

// The usage an empty kwok node reports, beyond its pods' usage.
const (
	NodeBaselineCPUMilli    = 10
	NodeBaselineMemoryBytes = 32 << 20
)

// DefaultPodUsage is what a pod without its own ResourceUsage uses, so that
// every pod appears in metrics.k8s.io as on a real node.
const (
	DefaultPodUsageCPU    = "1m"
	DefaultPodUsageMemory = "1Mi"
)
