package bench

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/ductile/ductile/daemon"
)

// daemonProcess is `ductile system start` run by binary as a process of
// its own, on stateDir.
type daemonProcess struct {
	cmd    *exec.Cmd
	stop   context.CancelFunc
	stderr bytes.Buffer
}

// startDaemonProcess starts binary with args (a system start on stateDir)
// and returns once it holds the state directory's lock as a daemon, which
// it takes when it is ready. Stop ends it with SIGTERM and waits.
func startDaemonProcess(ctx context.Context, binary, stateDir string, args []string) (*daemonProcess, error) {
	daemonCtx, stop := context.WithCancel(ctx)
	p := &daemonProcess{stop: stop}
	p.cmd = exec.CommandContext(daemonCtx, binary, args...)
	p.cmd.Cancel = func() error { return p.cmd.Process.Signal(syscall.SIGTERM) }
	p.cmd.WaitDelay = 30 * time.Second
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		stop()
		return nil, fmt.Errorf("start the daemon: %w", err)
	}
	for {
		if h, err := daemon.Holder(stateDir); err == nil && h.Daemon() {
			return p, nil
		}
		select {
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if p.cmd.Process.Signal(syscall.Signal(0)) != nil {
			p.Stop()
			return nil, fmt.Errorf("the daemon exited: %s", p.stderr.String())
		}
	}
}

// PID is the daemon's process id.
func (p *daemonProcess) PID() int { return p.cmd.Process.Pid }

// Stop ends the daemon (SIGTERM) and waits for it.
func (p *daemonProcess) Stop() {
	p.stop()
	_ = p.cmd.Wait()
}
