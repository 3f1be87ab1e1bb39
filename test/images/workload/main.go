// Command workload is the container the real-node tests and the demo run: it
// sleeps, burns a number of millicores, and holds a number of MiB of touched
// memory, so a test can make a pod use exactly what it wants to observe
// (cgroup limits, OOM kills, usage). Every flag can also be set through the
// environment, which pod specs make easier to read.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

func main() {
	millicores := flag.Int("burn-millicores", envInt("BURN_MILLICORES"), "CPU to keep busy, in millicores (env BURN_MILLICORES)")
	mib := flag.Int("allocate-mib", envInt("ALLOCATE_MIB"), "memory to allocate and touch at start, in MiB (env ALLOCATE_MIB)")
	exitAfter := flag.Duration("exit-after", envDuration("EXIT_AFTER"), "exit 0 after this long; 0 runs until stopped (env EXIT_AFTER)")
	flag.Parse()

	// Touch every page so the memory is resident and counts against the
	// cgroup's limit at once: an allocation over the limit is OOM-killed here.
	held := make([][]byte, 0, *mib)
	for i := 0; i < *mib; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		held = append(held, b)
	}
	fmt.Printf("workload: allocated %d MiB, burning %d millicores\n", len(held), *millicores)

	for n := *millicores; n > 0; n -= 1000 {
		go burn(min(n, 1000))
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
	runtime.KeepAlive(held)
}

// burn keeps one thread busy for millicores/1000 of every 100 ms period,
// the period CFS quotas use.
func burn(millicores int) {
	runtime.LockOSThread()
	const period = 100 * time.Millisecond
	busy := period * time.Duration(millicores) / 1000
	for {
		start := time.Now()
		for time.Since(start) < busy {
		}
		time.Sleep(period - busy)
	}
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
