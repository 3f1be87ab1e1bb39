package cluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Process is one program the cluster started, in its own process group so
// that it and anything it forks are stopped together.
type Process struct {
	Name string
	Path string
	Args []string
	// Env is added to this process's environment (NAME=value).
	Env     []string
	LogFile string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// live tracks every running process of every cluster in this test binary, so
// an interrupt (Ctrl-C, go test's timeout SIGQUIT excluded) still stops them.
var (
	liveMu   sync.Mutex
	live     = map[*Process]struct{}{}
	sigSetup sync.Once
)

func watchSignals() {
	sigSetup.Do(func() {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		go func() {
			s := <-c
			liveMu.Lock()
			procs := make([]*Process, 0, len(live))
			for p := range live {
				procs = append(procs, p)
			}
			liveMu.Unlock()
			for _, p := range procs {
				_ = p.Stop()
			}
			removeTempDirs()
			fmt.Fprintf(os.Stderr, "cluster: stopped %d processes on %s\n", len(procs), s)
			os.Exit(2)
		}()
	})
}

// Start runs the process, appending its output to LogFile.
func (p *Process) Start() error {
	watchSignals()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("%s already running", p.Name)
	}
	logf, err := os.OpenFile(p.LogFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.Path, p.Args...) //nolint:noctx // lives until Stop, not until some context ends
	cmd.Stdout, cmd.Stderr = logf, logf
	if len(p.Env) > 0 {
		cmd.Env = append(os.Environ(), p.Env...)
	}
	// Setpgid: stop the whole group. Pdeathsig: if the test binary is killed
	// outright (SIGKILL), the kernel still takes the children down.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	done := p.done
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	liveMu.Lock()
	live[p] = struct{}{}
	liveMu.Unlock()
	return nil
}

// PID returns the process id, or 0 when not running.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process has been started and not exited.
func (p *Process) Running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Exited returns a channel closed when the process exits (nil if never started).
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Stop sends SIGTERM to the process group, then SIGKILL after a grace period.
func (p *Process) Stop() error { return p.stop(syscall.SIGTERM, 10*time.Second) }

// Kill sends SIGKILL to the process group at once, as a crash would.
func (p *Process) Kill() error { return p.stop(syscall.SIGKILL, 0) }

func (p *Process) stop(sig syscall.Signal, grace time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, sig)
	if grace > 0 {
		select {
		case <-done:
		case <-time.After(grace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-done
		}
	} else {
		<-done
	}
	// Anything the process forked and left behind in its group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	p.mu.Lock()
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
	liveMu.Lock()
	delete(live, p)
	liveMu.Unlock()
	return nil
}

// Tail returns the last n bytes of the log.
func (p *Process) Tail(n int) string {
	data, err := os.ReadFile(p.LogFile)
	if err != nil {
		return err.Error()
	}
	if len(data) > n {
		data = data[len(data)-n:]
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return string(data)
}

// PIDAlive reports whether a process with this pid exists (and is not a zombie).
func PIDAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "stat"))
	if err != nil {
		return false
	}
	// Field 3 is the state; Z is a zombie (exited, not yet reaped).
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}
