// Command localcluster runs the test/cluster control plane in the background
// for people to poke at with kubectl: `up` starts it and returns once it is
// ready, `down` stops it. `make cluster-up` / `make cluster-down` call it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: localcluster up [-nodes N] | down | serve")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	nodes := fs.Int("nodes", 3, "kwok nodes to create")
	_ = fs.Parse(os.Args[2:])
	state, err := stateDir()
	if err == nil {
		switch os.Args[1] {
		case "up":
			err = up(state, *nodes)
		case "serve":
			err = serve(state, *nodes)
		case "down":
			err = down(state)
		default:
			err = fmt.Errorf("unknown command %q", os.Args[1])
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func stateDir() (string, error) {
	cache, err := cluster.CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "localcluster")
	return dir, os.MkdirAll(dir, 0o755)
}

func runningPID(state string) int {
	data, err := os.ReadFile(filepath.Join(state, "pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if cluster.PIDAlive(pid) {
		return pid
	}
	return 0
}

func up(state string, nodes int) error {
	kubeconfig := filepath.Join(state, "kubeconfig")
	if pid := runningPID(state); pid != 0 {
		fmt.Printf("already running (pid %d)\nexport KUBECONFIG=%s\n", pid, kubeconfig)
		return nil
	}
	_ = os.Remove(filepath.Join(state, "ready"))
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := filepath.Join(state, "localcluster.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "serve", "-nodes", strconv.Itoa(nodes)) //nolint:noctx // a daemon that outlives this command
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlive this shell command
	if err := cmd.Start(); err != nil {
		return err
	}
	fmt.Printf("starting the local cluster (pid %d, log %s); the first run builds the control plane\n", cmd.Process.Pid, logPath)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		if _, err := os.Stat(filepath.Join(state, "ready")); err == nil {
			fmt.Printf("ready with %d kwok nodes\nexport KUBECONFIG=%s\nstop it with: make cluster-down\n", nodes, kubeconfig)
			return nil
		}
		select {
		case err := <-exited:
			data, _ := os.ReadFile(logPath)
			return fmt.Errorf("cluster exited (%w):\n%s", err, data)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func serve(state string, nodes int) error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Log: os.Stdout})
	if err != nil {
		return err
	}
	defer c.Stop()
	names, err := c.AddNodes(ctx, nodes, cluster.NodeSpec{})
	if err != nil {
		return err
	}
	if err := c.WaitNodesReady(ctx, names, 2*time.Minute); err != nil {
		return err
	}
	data, err := os.ReadFile(c.Kubeconfig())
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(state, "kubeconfig"), data, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(state, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(state, "ready"), nil, 0o644); err != nil {
		return err
	}
	fmt.Println("ready; logs of every component are in", c.Dir())
	<-ctx.Done()
	fmt.Println("stopping")
	return nil
}

func down(state string) error {
	pid := runningPID(state)
	if pid == 0 {
		fmt.Println("no local cluster running")
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for cluster.PIDAlive(pid) {
		if time.Now().After(deadline) {
			return errors.New("cluster did not stop within 60s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, f := range []string{"pid", "ready", "kubeconfig"} {
		_ = os.Remove(filepath.Join(state, f))
	}
	fmt.Println("stopped")
	return nil
}
