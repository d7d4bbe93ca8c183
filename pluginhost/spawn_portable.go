//go:build !linux || ductile_portable

package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/ductile/ductile/events"
)

// process is one running plugin, on the portable path (every Unix system
// but Linux, and Linux built with the tag ductile_portable): plain pipes in
// the runtime's poller, and a goroutine for each thing that may block: one
// reads stdout, one stderr, one the control channel, one writes the
// request, and one waits for the leader to exit. Simpler and slower than
// the Linux path (spawn_linux.go), with the same outcomes; doc.go says
// where it differs.
type process struct {
	pid int

	stdin     *os.File      // the parent's end of stdin
	stdinDone chan struct{} // closed once the request is written (or given up) and stdin closed
	pipes     [2]pipeReader
	// overflow is closed by the stdout reader when stdout goes over its
	// cap; supervise then kills the group.
	overflow chan struct{}

	control     controlReader // the parent's end of the control channel (ControlFD); fd is its raw descriptor
	controlFile *os.File
	controlDone chan struct{} // closed when the control reader has stopped
	controlEnd  bool          // the reader saw the channel's end (and took its last line)

	sent bool // send has started the writer, the control reader and the waiter
	// exited is closed once the leader has exited; it has been reaped
	// then (status, reaped), unlike on the Linux path.
	exited chan struct{}
	status syscall.WaitStatus
	reaped bool
}

// pipeReader is the parent's end of the plugin's stdout or stderr, read
// by a goroutine of its own until its end, or until finish gives up on it.
type pipeReader struct {
	f    *os.File
	capt *capture
	done chan struct{} // closed when the reader has stopped (capt closed)
}

// longAgo is a deadline in the past: set on a pipe, it stops its reader.
var longAgo = time.Unix(1, 0)

// startProcess spawns p's entrypoint in p.Dir, with the parent's
// environment (PWD set to p.Dir, as os/exec sets it) and the run's (runEnv),
// leading its own process group, its stdin, stdout and stderr on pipes, and
// the write end of its control channel as file descriptor ControlFD.
func startProcess(p *Plugin, onStderr func(StderrLines), runID, traceID string) (*process, error) {
	var fds []int
	closeAll := func() {
		for _, fd := range fds {
			_ = syscall.Close(fd)
		}
	}
	// pipe makes a pipe whose ends are closed on exec: under ForkLock, so
	// that no process forked meanwhile by another goroutine inherits them.
	pipe := func(name string) (r, w int, err error) {
		var p [2]int
		syscall.ForkLock.RLock()
		err = syscall.Pipe(p[:])
		if err == nil {
			syscall.CloseOnExec(p[0])
			syscall.CloseOnExec(p[1])
		}
		syscall.ForkLock.RUnlock()
		if err != nil {
			closeAll()
			return -1, -1, fmt.Errorf("%s pipe: %w", name, err)
		}
		fds = append(fds, p[0], p[1])
		return p[0], p[1], nil
	}
	inR, inW, err := pipe("stdin")
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe("stdout")
	if err != nil {
		return nil, err
	}
	errR, errW, err := pipe("stderr")
	if err != nil {
		return nil, err
	}
	ctlR, ctlW, err := pipe("control")
	if err != nil {
		return nil, err
	}
	// The parent's ends are non-blocking, so os.NewFile puts them in the
	// runtime's poller (reads and writes take deadlines).
	for _, fd := range []int{inW, outR, errR, ctlR} {
		if err := syscall.SetNonblock(fd, true); err != nil {
			closeAll()
			return nil, fmt.Errorf("pipe: %w", err)
		}
	}
	env, err := childEnv(p.Dir)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("start %s: %w", p.Entrypoint, err)
	}
	env, pooledEnv := runEnv(env, runID, traceID)
	pid, err := syscall.ForkExec(p.Entrypoint, []string{p.Entrypoint}, &syscall.ProcAttr{
		Dir: p.Dir, Env: env, Files: []uintptr{uintptr(inR), uintptr(outW), uintptr(errW), uintptr(ctlW)},
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	releaseEnv(pooledEnv)
	if err != nil {
		closeAll()
		err = &os.PathError{Op: "fork/exec", Path: p.Entrypoint, Err: err}
		return nil, fmt.Errorf("start %s: %w%s", p.Entrypoint, err, interpreterHint(p.Entrypoint, err))
	}
	// The child holds its own copies; the parent keeps only its ends.
	for _, fd := range []int{inR, outW, errW, ctlW} {
		_ = syscall.Close(fd)
	}
	pr := &process{
		pid:       pid,
		stdin:     os.NewFile(uintptr(inW), "stdin"),
		stdinDone: make(chan struct{}),
		pipes: [2]pipeReader{
			{f: os.NewFile(uintptr(outR), "stdout"), capt: &capture{max: DefaultMaxStdout}, done: make(chan struct{})},
			{f: os.NewFile(uintptr(errR), "stderr"), capt: &capture{max: ExcerptBytes, tailMax: ExcerptBytes, onStderr: onStderr}, done: make(chan struct{})},
		},
		overflow:    make(chan struct{}),
		control:     controlReader{fd: ctlR},
		controlFile: os.NewFile(uintptr(ctlR), "control"),
		controlDone: make(chan struct{}),
		exited:      make(chan struct{}),
	}
	go pr.readPipe(&pr.pipes[0], pr.overflow)
	go pr.readPipe(&pr.pipes[1], nil)
	return pr, nil
}

// readPipe reads p to its end (or until finish gives up on it), into its
// capture; overflow, if set, is closed when the capture goes over its cap.
func (pr *process) readPipe(p *pipeReader, overflow chan struct{}) {
	defer close(p.done)
	buf := chunks.Get().(*[]byte)
	defer chunks.Put(buf)
	for {
		n, err := p.f.Read(*buf)
		if n > 0 && p.capt.write((*buf)[:n]) && overflow != nil {
			close(overflow) // write reports the overflow once
		}
		if err != nil { // end of file, or given up on (its deadline)
			break
		}
	}
	p.capt.close()
}

// readControl reads the control channel until its end, or until finish
// stops it (its deadline).
func (pr *process) readControl() {
	defer close(pr.controlDone)
	buf := chunks.Get().(*[]byte)
	defer chunks.Put(buf)
	for {
		n, err := pr.controlFile.Read(*buf)
		if n > 0 {
			pr.control.write((*buf)[:n])
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return
		}
		if err != nil { // end of file (or a read error: nothing more to get)
			pr.control.end()
			pr.controlEnd = true
			return
		}
	}
}

// drainControl reads what the control channel holds once the plugin has
// exited, without waiting for its end (a process outside the group may
// hold it open), and closes it. What it holds is at most a pipe's buffer,
// unless something still writes: then the reads stop after a bound.
func (pr *process) drainControl() {
	_ = pr.controlFile.SetReadDeadline(longAgo)
	<-pr.controlDone
	if !pr.controlEnd {
		// The reader has stopped: the descriptor (non-blocking) is read
		// here directly, as it is, until it is empty.
		const drainReads = 64 // 2 MiB in 32 KiB reads
		buf := chunks.Get().(*[]byte)
		for range drainReads {
			n, err := syscall.Read(pr.control.fd, *buf)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if n <= 0 || err != nil {
				break
			}
			pr.control.write((*buf)[:n])
		}
		chunks.Put(buf)
		pr.control.end() // a last line without its newline
	}
	_ = pr.controlFile.Close()
	pr.control.fd = -1
}

// identity is ProcessOf(pr.pid): the leader is not reaped before send.
func (pr *process) identity() (events.PluginProcess, error) {
	return ProcessOf(pr.pid)
}

// send writes the request to the plugin's stdin and closes it (nil: closes
// it unwritten), in a goroutine: what the pipe cannot take at once is
// written as the plugin reads it. An error (EPIPE: the plugin exited
// without reading) is not an outcome; the exit status and stdout decide.
// It also starts reading the control channel (pr.control.deliver is set
// by then) and waiting for the leader's exit.
func (pr *process) send(payload []byte) {
	pr.sent = true
	go func() {
		defer close(pr.stdinDone)
		if len(payload) > 0 {
			_, _ = pr.stdin.Write(payload)
		}
		_ = pr.stdin.Close()
	}()
	go pr.readControl()
	go pr.waitLeader()
}

// waitLeader waits for the leader to exit and reaps it (no system call
// both waits portably and leaves the zombie), then closes exited.
func (pr *process) waitLeader() {
	defer close(pr.exited)
	for {
		_, err := syscall.Wait4(pr.pid, &pr.status, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		pr.reaped = err == nil
		return
	}
}

// isExited reports whether the leader has exited.
func (pr *process) isExited() bool {
	select {
	case <-pr.exited:
		return true
	default:
		return false
	}
}

// supervise waits for the leader to exit, enforcing the timeout, ctx and the
// stdout cap. It returns why the runner terminated the group (timeout or
// canceled; "" if it did not) and whether SIGKILL had to follow SIGTERM.
func (pr *process) supervise(ctx context.Context, opts RunOptions) (reason events.Outcome, escalated bool) {
	timeout := time.NewTimer(opts.Timeout)
	defer timeout.Stop()
	var grace *time.Timer
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()
	var graceC <-chan time.Time
	done, overflow, deadline := ctx.Done(), pr.overflow, timeout.C
	for {
		var why events.Outcome
		kill, escalate := false, false
		select {
		case <-pr.exited:
			return reason, escalated
		case <-overflow:
			overflow, kill = nil, true
		case <-done:
			done, why = nil, events.OutcomeCanceled
		case <-deadline:
			deadline, why = nil, events.OutcomeTimeout
		case <-graceC:
			graceC, kill, escalate = nil, true, true
		}
		// Exited meanwhile, the outcome is the plugin's.
		if pr.isExited() {
			return reason, escalated
		}
		if why != "" && reason == "" {
			reason = why
			pr.signal(syscall.SIGTERM)
			grace = time.NewTimer(opts.Grace)
			graceC = grace.C
		}
		if kill {
			escalated = escalated || escalate
			pr.signal(syscall.SIGKILL)
		}
	}
}

// waitExited waits for the leader to exit, whatever comes meanwhile.
func (pr *process) waitExited() {
	if !pr.sent {
		pr.send(nil)
	}
	<-pr.exited
}

// finish runs once the leader has exited: it kills what is left of the
// group, and reads the pipes to their end, for at most waitDelay (drained
// is false when they were given up on then). It returns the leader's
// status (reaped is false if it could not be reaped). Every goroutine of
// the run has ended when it returns.
func (pr *process) finish(waitDelay time.Duration) (status syscall.WaitStatus, reaped, drained bool) {
	pr.waitExited()
	pr.signal(syscall.SIGKILL)
	pr.drainControl()

	// A process that left the group may hold the pipes open: they are
	// read until then.
	timer := time.NewTimer(waitDelay)
	defer timer.Stop()
	drained = true
	for i := range pr.pipes {
		p := &pr.pipes[i]
		if drained {
			select {
			case <-p.done:
				continue
			case <-timer.C:
				drained = false
				for j := range pr.pipes {
					_ = pr.pipes[j].f.SetReadDeadline(longAgo)
				}
			}
		}
		<-p.done
	}
	for i := range pr.pipes {
		_ = pr.pipes[i].f.Close()
	}
	// The request may still be blocked on a pipe a process outside the
	// group holds open.
	_ = pr.stdin.SetWriteDeadline(longAgo)
	<-pr.stdinDone
	if st := pr.pipes[1].capt.stream; st != nil {
		st.wait() // closed with the pipe: the last lines are being delivered
	}
	return pr.status, pr.reaped, drained
}
