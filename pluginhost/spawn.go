package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ductile/ductile/events"
)

// process is one running plugin with the pipes and goroutines Run owns:
// a reader for each of stdout and stderr, and a writer for stdin only when
// the request does not fit in its pipe at once. The caller's goroutine
// waits for the exit itself (supervise).
type process struct {
	pid int

	// exit becomes readable when the leader has exited (its pidfd, or a
	// pipe closed by a goroutine blocked in waitid where pidfds do not
	// work); exited checks it, leaving the leader unreaped.
	exit   *os.File
	exited func() bool
	// woken is set, before exit's deadline is moved to the past, by what
	// wakes supervise early: ctx ending, or stdout going over its cap.
	woken atomic.Bool

	stdin          int      // the parent's end of stdin (-1 once closed)
	stdinFile      *os.File // stdin, once handed to writer
	writerDone     chan struct{}
	stdoutR        *os.File
	stderrR        *os.File
	stdout, stderr *capture

	readers    atomic.Int32
	readerDone chan struct{} // closed when both readers have hit EOF or their deadline
}

// pidfdWorks reports whether pidfds can be used (Linux 5.3 and later).
var pidfdWorks = sync.OnceValue(func() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	_ = unix.Close(fd)
	return true
})

// startProcess spawns p's entrypoint in p.Dir, with the parent's
// environment (PWD set to p.Dir, as os/exec sets it), leading its own
// process group, its stdin, stdout and stderr on pipes.
func startProcess(p *Plugin, onStderr func(StderrLines)) (*process, error) {
	// The parent's ends are non-blocking (read and written through the
	// runtime's poller); the child's ends, never wrapped in an os.File,
	// are passed to it as they are and closed here once it runs.
	var fds []int
	closeAll := func() {
		for _, fd := range fds {
			_ = syscall.Close(fd)
		}
	}
	pipe := func(name string, parentEnd int) (parent, child int, err error) {
		var p [2]int
		if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
			closeAll()
			return -1, -1, fmt.Errorf("%s pipe: %w", name, err)
		}
		fds = append(fds, p[0], p[1])
		parent, child = p[parentEnd], p[1-parentEnd]
		if _, err := unix.FcntlInt(uintptr(parent), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
			closeAll()
			return -1, -1, fmt.Errorf("%s pipe: %w", name, err)
		}
		return parent, child, nil
	}
	inW, inR, err := pipe("stdin", 1)
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe("stdout", 0)
	if err != nil {
		return nil, err
	}
	errR, errW, err := pipe("stderr", 0)
	if err != nil {
		return nil, err
	}

	// Where pidfds do not work, a goroutine blocked in waitid closes the
	// write end of this pipe when the leader exits.
	exitR, exitW := -1, -1
	pidfd := -1
	sys := &syscall.SysProcAttr{Setpgid: true}
	if pidfdWorks() {
		sys.PidFD = &pidfd
	} else if exitR, exitW, err = pipe("exit", 0); err != nil {
		return nil, err
	}
	env, err := childEnv(p.Dir)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("start %s: %w", p.Entrypoint, err)
	}
	pid, err := syscall.ForkExec(p.Entrypoint, []string{p.Entrypoint}, &syscall.ProcAttr{
		Dir: p.Dir, Env: env, Files: []uintptr{uintptr(inR), uintptr(outW), uintptr(errW)}, Sys: sys,
	})
	if err != nil {
		closeAll()
		err = &os.PathError{Op: "fork/exec", Path: p.Entrypoint, Err: err}
		return nil, fmt.Errorf("start %s: %w%s", p.Entrypoint, err, interpreterHint(p.Entrypoint, err))
	}
	// The child holds its own copies; the parent keeps only its ends.
	_, _, _ = syscall.Close(inR), syscall.Close(outW), syscall.Close(errW)

	pr := &process{
		pid:        pid,
		stdin:      inW,
		stdoutR:    os.NewFile(uintptr(outR), "|1"),
		stderrR:    os.NewFile(uintptr(errR), "|2"),
		stdout:     &capture{max: DefaultMaxStdout},
		stderr:     &capture{max: ExcerptBytes, tailMax: ExcerptBytes, onStderr: onStderr},
		readerDone: make(chan struct{}),
	}
	pr.stdout.overflow = pr.wake
	if pidfd >= 0 {
		pr.exitOfPidfd(pidfd)
	} else {
		pr.exitOfWaiter(exitR, exitW)
	}
	pr.readers.Store(2)
	go pr.drain(pr.stdout, pr.stdoutR)
	go pr.drain(pr.stderr, pr.stderrR)
	return pr, nil
}

// childEnv is the environment os/exec gives a command with Dir set and
// Env nil: the parent's with PWD set to dir, each name once (its last
// value), entries not of the form name=value kept as they are, empty ones
// dropped.
func childEnv(dir string) ([]string, error) {
	pwd, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(), "PWD="+pwd)
	seen := make(map[string]struct{}, len(env))
	out := make([]string, len(env))
	j := len(out)
	for i := len(env) - 1; i >= 0; i-- {
		kv := env[i]
		if kv == "" {
			continue
		}
		eq := strings.IndexByte(kv, '=')
		if eq == 0 { // a name starting with "=", as Windows has
			eq = strings.IndexByte(kv[1:], '=') + 1
		}
		if eq > 0 {
			if _, dup := seen[kv[:eq]]; dup {
				continue
			}
			seen[kv[:eq]] = struct{}{}
		}
		j--
		out[j] = kv
	}
	return out[j:], nil
}

// exitOfPidfd makes exit pid's pidfd, which becomes readable when pid
// exits; waitid tells an exit from a spurious wake-up, leaving pid
// unreaped (a zombie) so its pid, and so its process group id, cannot be
// reused yet.
func (pr *process) exitOfPidfd(pidfd int) {
	// Non-blocking, os.NewFile puts it in the runtime's poller (pidfds
	// are pollable wherever they exist).
	_, _ = unix.FcntlInt(uintptr(pidfd), unix.F_SETFL, unix.O_NONBLOCK)
	f := os.NewFile(uintptr(pidfd), "pidfd")
	pid := pr.pid
	pr.exit, pr.exited = f, func() bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		// Exited (Signo is SIGCHLD), or nothing left to wait for: done.
		// Still running (or EINTR): wait for the pidfd.
		return (err == nil && info.Signo != 0) || (err != nil && !errors.Is(err, unix.EINTR))
	}
}

// exitOfWaiter makes exit the read end of a pipe whose write end a
// goroutine blocked in waitid (leaving pid unreaped) closes when pid exits:
// the way without pidfds (Linux before 5.3).
func (pr *process) exitOfWaiter(r, w int) {
	pid := pr.pid
	go func() {
		waitExitedBlocking(pid)
		_ = syscall.Close(w)
	}()
	pr.exit, pr.exited = os.NewFile(uintptr(r), "exit"), func() bool {
		var b [1]byte
		n, err := syscall.Read(r, b[:])
		return n == 0 && err == nil // end of file: the writer closed it
	}
}

func waitExitedBlocking(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return // nil, or ECHILD: nothing left to wait for
		}
	}
}

// waitExit waits until the leader has exited (true), or until deadline
// (zero: none) or a wake (false).
func (pr *process) waitExit(deadline time.Time) bool {
	rc, err := pr.exit.SyscallConn()
	if err != nil || pr.exit.SetReadDeadline(deadline) != nil {
		waitExitedBlocking(pr.pid) // not pollable: no deadline either
		return true
	}
	if pr.woken.Load() {
		return false // a wake came before this deadline was set
	}
	err = rc.Read(func(uintptr) bool { return pr.exited() })
	if err == nil {
		return true
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	waitExitedBlocking(pr.pid) // not pollable after all
	return true
}

// wake makes supervise look at ctx and the stdout cap now.
func (pr *process) wake() {
	pr.woken.Store(true)
	_ = pr.exit.SetReadDeadline(time.Unix(1, 0))
}

// send writes the request to the plugin's stdin and closes it (nil: closes
// it unwritten). A request the pipe cannot take at once is written by a
// goroutine, finished by finish at the latest. An error (EPIPE: the plugin
// exited without reading) is not an outcome; the exit status and stdout
// decide.
func (pr *process) send(payload []byte) {
	for len(payload) > 0 {
		n, err := syscall.Write(pr.stdin, payload)
		if n > 0 {
			payload = payload[n:]
		}
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if errors.Is(err, syscall.EAGAIN) {
			break // the pipe is full: the rest waits for the plugin to read
		}
		if err != nil {
			payload = nil
		}
	}
	if len(payload) == 0 {
		pr.closeStdin()
		return
	}
	pr.stdinFile = os.NewFile(uintptr(pr.stdin), "|0")
	pr.stdin = -1
	pr.writerDone = make(chan struct{})
	go func() {
		defer close(pr.writerDone)
		_, _ = pr.stdinFile.Write(payload) // ErrClosed: finish gave up on it
		_ = pr.stdinFile.Close()
	}()
}

// closeStdin closes the plugin's stdin, unblocking a writer stuck on a
// pipe nobody reads.
func (pr *process) closeStdin() {
	if pr.stdin >= 0 {
		_ = syscall.Close(pr.stdin)
		pr.stdin = -1
	}
	if pr.stdinFile != nil {
		_ = pr.stdinFile.Close()
	}
}

// supervise waits for the leader to exit, enforcing the timeout, ctx and the
// stdout cap. It returns why the runner terminated the group (timeout or
// canceled; "" if it did not) and whether SIGKILL had to follow SIGTERM.
//
// It waits on the exit with a deadline: the timeout's, then the grace's.
// ctx ending and stdout going over its cap wake it earlier (wake).
func (pr *process) supervise(ctx context.Context, opts RunOptions) (reason events.Outcome, escalated bool) {
	stop := context.AfterFunc(ctx, pr.wake)
	defer stop()
	deadline := time.Now().Add(opts.Timeout)
	var graceEnd time.Time // set once SIGTERM has been sent
	overflowKilled := false
	terminate := func(k events.Outcome) {
		if reason != "" {
			return
		}
		reason = k
		pr.signal(syscall.SIGTERM)
		graceEnd = time.Now().Add(opts.Grace)
	}
	for {
		next := deadline
		if reason != "" {
			next = graceEnd
		}
		if pr.waitExit(next) {
			return reason, escalated
		}
		// A wake, or the deadline. The leader may have exited meanwhile:
		// then the outcome is the plugin's.
		pr.woken.Store(false)
		if pr.exited() {
			return reason, escalated
		}
		if pr.stdout.overflowed.Load() && !overflowKilled {
			overflowKilled = true
			pr.signal(syscall.SIGKILL)
		}
		now := time.Now()
		switch {
		case ctx.Err() != nil && reason == "":
			terminate(events.OutcomeCanceled)
		case reason == "" && !now.Before(deadline):
			terminate(events.OutcomeTimeout)
		case reason != "" && !escalated && !now.Before(graceEnd):
			escalated = true
			pr.signal(syscall.SIGKILL)
			graceEnd = time.Time{} // wait for the exit, with no deadline
		}
	}
}

// signal sends sig to the plugin's process group. ESRCH (nobody left) is
// expected and ignored.
func (pr *process) signal(sig syscall.Signal) {
	_ = syscall.Kill(-pr.pid, sig)
}

// drain reads f into c until its end (or its deadline); the last of the
// two readers to finish closes readerDone.
func (pr *process) drain(c *capture, f *os.File) {
	c.drain(f)
	if pr.readers.Add(-1) == 0 {
		close(pr.readerDone)
	}
}

// finish runs once the leader has exited: it kills what is left of the
// group, reaps the leader (reaped is false if it could not), waits for the
// pipes to reach their end (at most waitDelay) and for the stdin writer.
// drained is false when the pipes were given up on.
func (pr *process) finish(waitDelay time.Duration) (status syscall.WaitStatus, reaped, drained bool) {
	// The leader is a zombie, so the group id is still ours to signal.
	pr.signal(syscall.SIGKILL)
	for {
		_, err := syscall.Wait4(pr.pid, &status, 0, nil)
		if !errors.Is(err, syscall.EINTR) {
			reaped = err == nil
			break
		}
	}
	_ = pr.exit.Close()

	drained = true
	select {
	case <-pr.readerDone:
	default:
		// A process that left the group may hold the pipes open.
		deadline := time.Now().Add(waitDelay)
		_ = pr.stdoutR.SetReadDeadline(deadline)
		_ = pr.stderrR.SetReadDeadline(deadline)
		<-pr.readerDone
		drained = !pr.stdout.expired && !pr.stderr.expired
	}
	pr.closeStdin() // unblocks a writer stuck on a pipe nobody reads
	if pr.writerDone != nil {
		<-pr.writerDone
	}
	_ = pr.stdoutR.Close()
	_ = pr.stderrR.Close()
	if st := pr.stderr.stream; st != nil {
		st.wait() // its reader (done) has closed it: the last lines are being delivered
	}
	return status, reaped, drained
}
