// Command workload is the container the real-node tests and the demo run: it
// sleeps, burns a number of millicores, and holds a number of MiB of touched
// memory, so a test can make a pod use exactly what it wants to observe
// (cgroup limits, OOM kills, usage). Its burners can follow a schedule of
// wall-clock slots and print the work they did in each (package workslots),
// and its memory can grow at a set rate. For the network of real nodes it also
// serves HTTP and gets a URL, or an API server path through in-cluster
// configuration. Every flag can also be set through the environment, which
// pod specs make easier to read.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kube-reclaim/kube-reclaim/test/images/workslots"
)

func main() {
	millicores := flag.Int("burn-millicores", envInt("BURN_MILLICORES"), "CPU to keep busy, in millicores (env BURN_MILLICORES)")
	mib := flag.Int("allocate-mib", envInt("ALLOCATE_MIB"), "memory to allocate and touch at start, in MiB (env ALLOCATE_MIB)")
	exitAfter := flag.Duration("exit-after", envDuration("EXIT_AFTER"), "exit 0 after this long; 0 runs until stopped (env EXIT_AFTER)")
	serve := flag.String("serve", os.Getenv("SERVE"), "serve HTTP on this address, answering every path with the pod's hostname (env SERVE)")
	getURL := flag.String("get", os.Getenv("GET_URL"), "GET this URL until it answers 200, print the body and exit (env GET_URL)")
	getAPI := flag.String("get-api", os.Getenv("GET_API_PATH"), "GET this path from the API server through in-cluster configuration (KUBERNETES_SERVICE_HOST/PORT, the service-account token and CA) until it answers 200, print the body and exit (env GET_API_PATH)")
	getTimeout := flag.Duration("get-timeout", envDurationOr("GET_TIMEOUT", time.Minute), "how long -get and -get-api keep trying (env GET_TIMEOUT)")
	var sched workslots.Schedule
	flag.DurationVar(&sched.Slot, "burn-slot", envDuration("BURN_SLOT"), "length of the wall-clock slots -burn-pattern works in; with it, the work done in every slot is printed (env BURN_SLOT)")
	flag.StringVar(&sched.Pattern, "burn-pattern", os.Getenv("BURN_PATTERN"), "which slots the burners work in: slot i works when the pattern's character i mod its length is 1, rests when 0 (env BURN_PATTERN)")
	growRate := flag.Int("grow-mib-per-second", envInt("GROW_MIB_PER_SECOND"), "after -allocate-mib, allocate and touch this many MiB more every second (env GROW_MIB_PER_SECOND)")
	growTo := flag.Int("grow-to-mib", envInt("GROW_TO_MIB"), "stop growing once this many MiB are held (env GROW_TO_MIB)")
	growAfter := flag.Duration("grow-after", envDuration("GROW_AFTER"), "start growing this long after the start (env GROW_AFTER)")
	flag.Parse()
	if err := sched.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	switch {
	case *getURL != "":
		os.Exit(get(*getURL, *getTimeout, http.DefaultClient, nil))
	case *getAPI != "":
		client, header, err := inClusterClient()
		if err != nil {
			report(err.Error())
			os.Exit(1)
		}
		host := net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
		os.Exit(get("https://"+host+*getAPI, *getTimeout, client, header))
	}
	if *serve != "" {
		go func() {
			hostname, _ := os.Hostname()
			srv := &http.Server{Addr: *serve, ReadHeaderTimeout: 10 * time.Second,
				Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "workload %s\n", hostname) })}
			if err := srv.ListenAndServe(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}()
	}

	mem := &memory{}
	mem.grow(*mib)
	fmt.Printf("workload: allocated %d MiB, burning %d millicores\n", mem.mib(), *millicores)
	if *growRate > 0 && *growTo > mem.mib() {
		go func() {
			time.Sleep(*growAfter)
			mem.growAt(*growRate, *growTo)
		}()
	}

	threads := (*millicores + 999) / 1000
	var t *tally
	if sched.Slot > 0 {
		t = &tally{threads: threads, open: map[int64]*workslots.Report{}}
	}
	for n := *millicores; n > 0; n -= 1000 {
		go burn(min(n, 1000), sched, t)
	}

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	var deadline <-chan time.Time
	if *exitAfter > 0 {
		deadline = time.After(*exitAfter)
	}
	select {
	case <-stop:
	case <-deadline:
	}
	runtime.KeepAlive(mem)
}

// memory is what the workload holds, in touched 1 MiB chunks.
type memory struct {
	mu   sync.Mutex
	held [][]byte
}

func (m *memory) mib() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.held)
}

// grow allocates n MiB more. Every page is touched so the memory is
// resident and counts against the cgroup's limit at once: an allocation over
// the limit is OOM-killed here.
func (m *memory) grow(n int) {
	for range n {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		m.mu.Lock()
		m.held = append(m.held, b)
		m.mu.Unlock()
	}
}

// growAt grows by rate MiB every second until to MiB are held, printing the
// amount at every step so the pod's log tells the course of its use.
func (m *memory) growAt(rate, to int) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for range tick.C {
		m.grow(min(rate, to-m.mib()))
		n := m.mib()
		fmt.Printf("workload: holding %d MiB\n", n)
		if n >= to {
			return
		}
	}
}

// burn keeps one thread busy for millicores/1000 of every 100 ms period (the
// period CFS quotas use) in the slots sched works in, doing fixed units of
// arithmetic, and tells t (when set) the units and thread CPU time of every
// slot.
func burn(millicores int, sched workslots.Schedule, t *tally) {
	// Alone on its thread, so the thread's CPU clock is this burner's.
	runtime.LockOSThread()
	const period = 100 * time.Millisecond
	busy := period * time.Duration(millicores) / 1000
	x := uint64(time.Now().UnixNano()) | 1
	now := time.Now()
	slot, cpu0, units := sched.Index(now), threadCPU(), int64(0)
	periodStart := now
	for {
		if i := sched.Index(now); i != slot {
			cpu := threadCPU()
			t.add(sched, slot, units, cpu-cpu0)
			// Slots slept through: nothing done in them.
			for k := slot + 1; k < i; k++ {
				t.add(sched, k, 0, 0)
			}
			slot, cpu0, units = i, cpu, 0
		}
		if !sched.Working(slot) {
			time.Sleep(time.Until(sched.Start(slot + 1)))
			now, periodStart = time.Now(), time.Now()
			continue
		}
		x = work(x)
		units++
		now = time.Now()
		if elapsed := now.Sub(periodStart); elapsed >= busy {
			if busy < period {
				time.Sleep(period - elapsed)
				now = time.Now()
			}
			periodStart = now
		}
	}
}

// work is one unit of a burner's throughput: a fixed chain of dependent
// arithmetic (xorshift64), some microseconds long, that touches no memory.
func work(x uint64) uint64 {
	for range 1 << 14 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	if x == 0 {
		// Never: xorshift keeps a non-zero state non-zero. Using the result
		// keeps the compiler from dropping the loop.
		panic("xorshift reached 0")
	}
	return x
}

// threadCPU is the CPU time of the calling OS thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// tally sums the burners' slot reports and prints a slot once every burner
// has reported it. A nil tally drops them.
type tally struct {
	threads int
	mu      sync.Mutex
	open    map[int64]*workslots.Report
}

func (t *tally) add(sched workslots.Schedule, slot, units int64, cpu time.Duration) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.open[slot]
	if r == nil {
		r = &workslots.Report{Slot: slot, Working: sched.Working(slot)}
		t.open[slot] = r
	}
	r.Units += units
	r.CPUNanos += cpu.Nanoseconds()
	r.Threads++
	if r.Threads == t.threads {
		fmt.Println(r.Line())
		delete(t.open, slot)
	}
}

// get retries a GET until it answers 200 or timeout passes; the outcome
// goes to stdout and the termination message, which a test reads from the
// pod's status. Retrying covers the moments before kube-proxy programs a new
// Service.
func get(url string, timeout time.Duration, client *http.Client, header http.Header) int {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last string
	for {
		body, err := getOnce(ctx, url, client, header)
		if err == nil {
			report(fmt.Sprintf("GET %s: 200: %s", url, body))
			return 0
		}
		last = err.Error()
		select {
		case <-ctx.Done():
			report(fmt.Sprintf("GET %s: no 200 within %s, last: %s", url, timeout, last))
			return 1
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func getOnce(ctx context.Context, url string, client *http.Client, header http.Header) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 2048))
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", res.Status, body)
	}
	return string(body), nil
}

// inClusterClient is what client-go's rest.InClusterConfig reads: the
// service-account CA and token mounted into every pod.
func inClusterClient() (*http.Client, http.Header, error) {
	const dir = "/var/run/secrets/kubernetes.io/serviceaccount/"
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" || os.Getenv("KUBERNETES_SERVICE_PORT") == "" {
		return nil, nil, errors.New("KUBERNETES_SERVICE_HOST/PORT not set: not in a cluster")
	}
	token, err := os.ReadFile(dir + "token")
	if err != nil {
		return nil, nil, err
	}
	ca, err := os.ReadFile(dir + "ca.crt")
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, nil, errors.New("no certificate in " + dir + "ca.crt")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	return client, http.Header{"Authorization": {"Bearer " + string(token)}}, nil
}

// report prints msg and writes it as the container's termination message.
func report(msg string) {
	fmt.Println(msg)
	_ = os.WriteFile("/dev/termination-log", []byte(msg), 0o644)
}

func envDurationOr(name string, d time.Duration) time.Duration {
	if v := envDuration(name); v > 0 {
		return v
	}
	return d
}

func envInt(name string) int {
	v, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		return 0
	}
	return v
}

func envDuration(name string) time.Duration {
	d, err := time.ParseDuration(os.Getenv(name))
	if err != nil {
		return 0
	}
	return d
}
