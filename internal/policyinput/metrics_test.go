package policyinput

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8sprotobuf "k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	metricsscheme "k8s.io/metrics/pkg/client/clientset/versioned/scheme"

	"github.com/kube-reclaim/kube-reclaim/policy"
)

const protobufType = "application/vnd.kubernetes.protobuf"

// metricsServer serves nodes and pods as a metrics.k8s.io server would, in
// protobuf or JSON, or body verbatim when set.
func metricsServer(t *testing.T, contentType string, nodes *metricsv1beta1.NodeMetricsList, pods *metricsv1beta1.PodMetricsList, body []byte) metricsclient.Interface {
	t.Helper()
	encode := func(obj k8sruntime.Object) []byte {
		if body != nil {
			return body
		}
		var b bytes.Buffer
		if contentType == protobufType {
			if err := k8sprotobuf.NewSerializer(metricsscheme.Scheme, metricsscheme.Scheme).Encode(obj, &b); err != nil {
				t.Fatal(err)
			}
			return b.Bytes()
		}
		data, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	nodeBody, podBody := encode(nodes), encode(pods)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		switch r.URL.Path {
		case "/apis/metrics.k8s.io/v1beta1/nodes":
			if sel := r.URL.Query().Get("labelSelector"); sel != "pool=a" {
				http.Error(w, "want labelSelector pool=a, got "+sel, http.StatusBadRequest)
				return
			}
			_, _ = w.Write(nodeBody)
		case "/apis/metrics.k8s.io/v1beta1/pods":
			_, _ = w.Write(podBody)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	mc, err := metricsclient.NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: protobufType, AcceptContentTypes: protobufType + ",application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

func TestReadMetricsAddsEveryItemAsAWholeListWould(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0).UTC()
	nodes := &metricsv1beta1.NodeMetricsList{Items: []metricsv1beta1.NodeMetrics{
		nodeMetrics("n1", t0, "1500m", "2Gi"), nodeMetrics("n2", t0.Add(time.Second), "3", "5Gi")}}
	pods := &metricsv1beta1.PodMetricsList{Items: []metricsv1beta1.PodMetrics{
		podMetrics("a", t0, "100m", "1Mi"), podMetrics("b", t0.Add(2*time.Second), "250m", "3Mi"), podMetrics("c", t0, "1", "1Gi")}}
	// The fake's tracker files metrics under guessed resource names: serve
	// the lists directly.
	fakeClient := metricsfake.NewSimpleClientset()
	fakeClient.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, k8sruntime.Object, error) { return true, nodes, nil })
	fakeClient.PrependReactor("list", "pods", func(clienttesting.Action) (bool, k8sruntime.Object, error) { return true, pods, nil })

	want := New(names(t))
	want.Resize(time.Hour, MinScrapeInterval)
	want.AddNodeMetrics(nodes.Items)
	want.AddPodMetrics(pods.Items)

	for _, tc := range []struct {
		name   string
		client metricsclient.Interface
	}{
		{"protobuf, item by item", metricsServer(t, protobufType, nodes, pods, nil)},
		{"json", metricsServer(t, "application/json", nodes, pods, nil)},
		{"clientset fake, listed", fakeClient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(names(t))
			a.Resize(time.Hour, MinScrapeInterval)
			opts := metav1.ListOptions{}
			if tc.client != fakeClient {
				opts.LabelSelector = "pool=a"
			}
			n, err := a.ReadNodeMetrics(context.Background(), tc.client, opts)
			if err != nil || n != 2 {
				t.Fatalf("ReadNodeMetrics = %d, %v; want 2 new samples", n, err)
			}
			p, err := a.ReadPodMetrics(context.Background(), tc.client)
			if err != nil || p != 3 {
				t.Fatalf("ReadPodMetrics = %d, %v; want 3 new samples", p, err)
			}
			for _, node := range []string{"n1", "n2"} {
				if got, w := a.History().AppendNode(nil, node), want.History().AppendNode(nil, node); !reflect.DeepEqual(got, w) {
					t.Errorf("node %s: %v, want %v", node, got, w)
				}
			}
			for _, pod := range []string{"a", "b", "c"} {
				got, w := appendPod(a.History(), nil, appendPodKey(nil, "ns", pod)), appendPod(want.History(), nil, appendPodKey(nil, "ns", pod))
				if len(w) != 1 || !reflect.DeepEqual(got, w) {
					t.Errorf("pod %s: %v, want %v", pod, got, w)
				}
			}
		})
	}
}

func TestReadMetricsRejectsMalformedListsAndKeepsTheHistory(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0).UTC()
	for _, tc := range []struct {
		name, contentType string
		body              []byte
	}{
		// The protobuf envelope, then a list whose item claims more bytes
		// than follow.
		{"truncated protobuf item", protobufType, []byte("k8s\x00\x12\x04\x12\x7f\x0a\x01")},
		{"protobuf envelope cut short", protobufType, []byte("k8s\x00\x12\x7f")},
		{"protobuf list with a varint field", protobufType, []byte("k8s\x00\x12\x02\x08\x01")},
		{"json items not a list", "application/json", []byte(`{"items": {}}`)},
		{"not json", "application/json", []byte(`{"items": [`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(names(t))
			a.Resize(time.Hour, MinScrapeInterval)
			a.History().AddPod(appendPodKey(nil, "ns", "kept"), policy.Sample{Time: t0, CPUMilli: 5})
			mc := metricsServer(t, tc.contentType, nil, nil, tc.body)
			_, err := a.ReadPodMetrics(context.Background(), mc)
			if err == nil || !strings.Contains(err.Error(), "metrics list") {
				t.Fatalf("a malformed list read with error %v, want one saying the metrics list is malformed", err)
			}
			if got := appendPod(a.History(), nil, appendPodKey(nil, "ns", "kept")); len(got) != 1 {
				t.Errorf("history lost its sample: %v", got)
			}
		})
	}
}
