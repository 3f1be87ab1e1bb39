// Command pause is the pod sandbox process of the local real node: it holds
// the pod's namespaces open, reaps orphans when it is PID 1, and exits on
// SIGTERM or SIGINT. Built locally because the test cluster never pulls.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	child := make(chan os.Signal, 1)
	signal.Notify(child, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			return
		case <-child:
			// Processes re-parented to us when the pod shares its PID
			// namespace would otherwise stay zombies.
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
