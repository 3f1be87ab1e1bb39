package framework

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
)

// NodeWritesAuditPolicy records every write to nodes and nodes/status, for
// cluster.Options.AuditPolicy.
const NodeWritesAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: ["nodes", "nodes/status"]
  verbs: ["patch", "update"]
- level: None
`

// AuditFlush is how long the apiserver may hold an event before writing it
// (test/cluster runs the audit log in batches of at most a second).
const AuditFlush = 2 * time.Second

// AuditEvent is the part of an apiserver audit event (audit.k8s.io/v1) the
// tests read.
type AuditEvent struct {
	Verb      string `json:"verb"`
	Stage     string `json:"stage"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
		// Extra names, for a service account token bound to a pod, that
		// pod (authentication.kubernetes.io/pod-name): which replica wrote.
		Extra map[string][]string `json:"extra"`
	} `json:"user"`
	ObjectRef struct {
		APIGroup    string `json:"apiGroup"`
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"responseStatus"`
	StageTimestamp time.Time `json:"stageTimestamp"`
	// Annotations carry, among others, the admission webhooks that mutated
	// the request (mutation.webhook.admission.k8s.io/round_R_index_I).
	Annotations map[string]string `json:"annotations"`
}

// MutatedBy returns "<configuration>/<webhook>" of the first admission
// webhook annotation of e whose configuration is one of configs (a webhook
// the API server called on the request), or "".
func (e *AuditEvent) MutatedBy(configs map[string]bool) string {
	for k, v := range e.Annotations {
		if !strings.HasPrefix(k, "mutation.webhook.admission.k8s.io/") {
			continue
		}
		var a struct {
			Configuration string `json:"configuration"`
			Webhook       string `json:"webhook"`
		}
		if json.Unmarshal([]byte(v), &a) == nil && configs[a.Configuration] {
			return a.Configuration + "/" + a.Webhook
		}
	}
	return ""
}

// NodeWrites reads the audit log of c: the completed writes to nodes (and
// their subresources) stamped in [from, to].
func NodeWrites(t testing.TB, c *cluster.Cluster, from, to time.Time) []AuditEvent {
	t.Helper()
	return AuditEvents(t, c, from, to, func(e *AuditEvent) bool { return e.ObjectRef.Resource == "nodes" })
}

// WaitAuditPast waits until the audit log of c holds a recorded request
// completed a second after to, and fails the test when none shows within
// timeout. The apiserver writes its log in batches, later still on a busy
// machine, so a reading of [from, to] made at once may miss the last
// events; requests are logged in about the order they complete, so one
// stamped later shows the batches up to to are written. Call it where a
// steady writer the policy records (kwok's heartbeats) runs.
func WaitAuditPast(t testing.TB, c *cluster.Cluster, to time.Time, timeout time.Duration) {
	t.Helper()
	marker := to.Add(time.Second)
	if _, ok := Poll(timeout, 500*time.Millisecond, func() bool {
		return len(AuditEvents(t, c, marker, time.Now().Add(time.Hour), func(*AuditEvent) bool { return true })) > 0
	}); !ok {
		t.Fatalf("the audit log holds no request completed after %s within %s: a reading up to then may be incomplete", marker.Format(time.RFC3339Nano), timeout)
	}
}

// AuditEvents reads the audit log of c: the completed requests stamped in
// [from, to] that keep accepts (what the cluster's audit policy records).
func AuditEvents(t testing.TB, c *cluster.Cluster, from, to time.Time, keep func(*AuditEvent) bool) []AuditEvent {
	t.Helper()
	f, err := os.Open(c.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []AuditEvent
	dec := json.NewDecoder(f)
	for {
		var e AuditEvent
		if err := dec.Decode(&e); err != nil {
			// io.EOF, or the apiserver is writing the last line right now.
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Logf("audit log: stopped at %v", err)
			}
			break
		}
		if e.Stage == "ResponseComplete" && keep(&e) &&
			!e.StageTimestamp.Before(from) && !e.StageTimestamp.After(to) {
			out = append(out, e)
		}
	}
	return out
}
