package extender

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// --max-in-flight (filter, prioritize) and --max-in-flight-binds calls of a
// verb are served at once; the next is answered
// 429 within slotWait, and served again once a slot frees.
func TestEachVerbServesAtMostMaxInFlightCallsAtOnce(t *testing.T) {
	// Different bounds, so that each verb is seen to keep its own.
	const verbSlots, bindSlots = 2, 3
	p := pod("p", "", 1000, gi)
	args, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: p, NodeNames: &[]string{"n1"}})
	bind, _ := json.Marshal(extenderv1.ExtenderBindingArgs{PodName: p.Name, PodNamespace: p.Namespace, PodUID: p.UID, Node: "n1"})
	for _, tt := range []struct {
		verb  string
		body  []byte
		slots int
	}{{"filter", args, verbSlots}, {"prioritize", args, verbSlots}, {"bind", bind, bindSlots}} {
		t.Run(tt.verb, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{}, node("n1", 64000, 64*gi, time.Minute), p)
			f.withholdBinds(nil)
			f.admit(p, "n1")
			f.ext.server.setMaxInFlight(verbSlots, bindSlots)
			slots := tt.slots
			call := func() *httptest.ResponseRecorder {
				rec := httptest.NewRecorder()
				f.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/"+tt.verb, bytes.NewReader(tt.body)))
				return rec
			}
			// Every verb takes the cache's lock inside its slot (the node
			// names, the states, the bind's check of the room): held, it
			// keeps the calls in their slots.
			release := f.ext.cache.Hold()
			held := make(chan int, slots)
			var wg sync.WaitGroup
			for range slots {
				wg.Go(func() { held <- call().Code })
			}
			f.eventually("the calls to take every slot", func() bool { return f.ext.server.inflight[tt.verb].InUse() == slots })
			start := time.Now()
			busy := call()
			took := time.Since(start)
			release()
			wg.Wait()
			close(held)
			if busy.Code != http.StatusTooManyRequests || !strings.Contains(busy.Body.String(), fmt.Sprintf("extender busy: all %d in-flight %s calls are taken", slots, tt.verb)) {
				t.Errorf("the call beyond the slots: %d %q, want 429", busy.Code, busy.Body.String())
			}
			if took < slotWait || took > slotWait+5*time.Second {
				t.Errorf("the call beyond the slots was answered after %s, want after slotWait (%s) and soon after", took, slotWait)
			}
			for code := range held {
				if code != http.StatusOK {
					t.Errorf("a call holding a slot was answered %d, want 200", code)
				}
			}
			// Positive control: with the slots free, the same call is served.
			if rec := call(); rec.Code != http.StatusOK {
				t.Errorf("a call after the slots freed: %d %q", rec.Code, rec.Body.String())
			}
		})
	}
}

// A call's body is read before it takes a slot, within bodyTimeout: a
// client that sends headers and then its body slowly, or never, holds no
// slot, and is answered 408 once its time is up.
func TestASlowBodyHoldsNoSlot(t *testing.T) {
	p := pod("p", "", 1000, gi)
	body, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: p, NodeNames: &[]string{"n1"}})
	for _, tt := range []struct {
		name string
		// sent is what the slow client sends of its 1000-byte body.
		sent string
	}{
		{"headers only", ""},
		{"part of a body", `{"Pod":{"metadata":`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{}, node("n1", 64000, 64*gi, time.Minute), p)
			f.ext.server.setMaxInFlight(1, 1)
			f.ext.server.bodyTimeout = 500 * time.Millisecond
			srv := httptest.NewServer(f.h)
			defer srv.Close()
			var slow []net.Conn
			for range 3 {
				conn, err := net.Dial("tcp", srv.Listener.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				fmt.Fprintf(conn, "POST /filter HTTP/1.1\r\nHost: extender\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n%s", tt.sent)
				slow = append(slow, conn)
			}
			// The scheduler's call is served while they stall.
			resp, err := http.Post(srv.URL+"/filter", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("the scheduler's filter while slow clients stall: %d, want 200", resp.StatusCode)
			}
			for i, conn := range slow {
				_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Fatalf("slow client %d: %v", i, err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusRequestTimeout {
					t.Errorf("slow client %d answered %d, want 408", i, resp.StatusCode)
				}
			}
			if n := f.ext.server.inflight["filter"].InUse(); n != 0 {
				t.Errorf("%d filter slots in use after every call was answered", n)
			}
		})
	}
}
