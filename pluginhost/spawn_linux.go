//go:build linux && !ductile_portable

package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ductile/ductile/events"
)

// process is one running plugin. The goroutine that runs it does all of
// its work: the plugin's stdin, stdout and stderr and its exit (a pidfd)
// are watched by an epoll instance of the run's own, itself waited on in
// the runtime's poller, so a run starts no goroutine (but the stream of its
// stderr, if it writes any) and wakes once per batch of events.
type process struct {
	pid int
	// startTicks is its start time as /proc/<pid>/stat shows it, when
	// known from the clock read around its fork (forkTicks); 0 if not.
	startTicks uint64

	ep   *os.File // the run's epoll instance, in the runtime's poller
	epfd int
	// woken is set, before ep's deadline is moved to the past, when ctx
	// ends (wake).
	woken atomic.Bool

	// exitFd becomes readable when the leader has exited: its pidfd, or
	// a pipe closed by a goroutine blocked in waitid where pidfds do not
	// work (exitPipe). exited is set once it has, the leader still
	// unreaped (a zombie, so its pid, and so its process group id, cannot
	// be reused yet).
	exitFd   int
	exitPipe bool
	exited   bool

	stdin   int    // the parent's end of stdin, or -1 once closed
	request []byte // what is left to write of the request
	pipes   [2]pipeReader
	control controlReader // the parent's end of the control channel (ControlFD)
	// overflowed is set when stdout goes over its cap, until supervise
	// has killed the group for it.
	overflowed bool
	buf        *[]byte // the read buffer, from chunks
}

// pipeReader is the parent's end of the plugin's stdout or stderr.
type pipeReader struct {
	fd   int // -1 once at its end (or given up on) and closed
	capt *capture
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
// environment (PWD set to p.Dir, as os/exec sets it) and the run's (runEnv),
// leading its own process group, its stdin, stdout and stderr on pipes, and
// the write end of its control channel as file descriptor ControlFD.
func startProcess(p *Plugin, onStderr func(StderrLines), runID, traceID string) (*process, error) {
	// The parent's ends are non-blocking; the child's ends are passed to
	// it as they are and closed here once it runs.
	var held [12]int // room for every fd below: no allocation
	fds := held[:0]
	closeAll := func() {
		for _, fd := range fds {
			rawClose(fd)
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
		if err := setNonblock(parent); err != nil {
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
	ctlR, ctlW, err := pipe("control", 0)
	if err != nil {
		return nil, err
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err == nil {
		fds = append(fds, epfd)
		err = setNonblock(epfd)
	}
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("epoll: %w", err)
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
	env, pooledEnv := runEnv(env, runID, traceID)
	before := bootTime()
	pid, err := syscall.ForkExec(p.Entrypoint, []string{p.Entrypoint}, &syscall.ProcAttr{
		Dir: p.Dir, Env: env, Files: []uintptr{uintptr(inR), uintptr(outW), uintptr(errW), uintptr(ctlW)}, Sys: sys,
	})
	after := bootTime()
	releaseEnv(pooledEnv)
	if err != nil {
		closeAll()
		err = &os.PathError{Op: "fork/exec", Path: p.Entrypoint, Err: err}
		return nil, fmt.Errorf("start %s: %w%s", p.Entrypoint, err, interpreterHint(p.Entrypoint, err))
	}
	// The child holds its own copies; the parent keeps only its ends.
	rawClose(inR)
	rawClose(outW)
	rawClose(errW)
	rawClose(ctlW)
	fds = slices.DeleteFunc(fds, func(fd int) bool { return fd == inR || fd == outW || fd == errW || fd == ctlW })

	pr := &process{
		pid:        pid,
		startTicks: forkTicks(before, after),
		epfd:       epfd,
		exitFd:     pidfd,
		stdin:      inW,
		pipes: [2]pipeReader{
			{fd: outR, capt: &capture{max: DefaultMaxStdout}},
			{fd: errR, capt: &capture{max: ExcerptBytes, tailMax: ExcerptBytes, onStderr: onStderr}},
		},
		control: controlReader{fd: ctlR},
		buf:     chunks.Get().(*[]byte),
	}
	if pidfd < 0 {
		if exitR < 0 { // the kernel made no pidfd after all
			if exitR, exitW, err = pipe("exit", 0); err != nil {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				reap(pid)
				return nil, err
			}
		}
		pr.exitFd, pr.exitPipe = exitR, true
		go func() {
			waitExitedBlocking(pid)
			rawClose(exitW)
		}()
	}
	for _, fd := range []int{outR, errR, ctlR, pr.exitFd} {
		// Cannot fail on a fresh epoll instance and fds of its kind.
		_ = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)})
	}
	// Non-blocking, os.NewFile puts it in the runtime's poller.
	pr.ep = os.NewFile(uintptr(epfd), "epoll")
	if err := pr.ep.SetReadDeadline(time.Time{}); err != nil {
		pr.signal(syscall.SIGKILL)
		pr.closeStdin()
		pr.exited = true
		pr.finish(0)
		return nil, fmt.Errorf("epoll: %w", err)
	}
	return pr, nil
}

// The kernel stamps a process with the boot-time clock as it forks it, and
// /proc/<pid>/stat shows that stamp in clock ticks (USER_HZ, 100 a second):
// read before and after the fork, the clock gives the tick, unless the two
// readings straddle one. That spares reading /proc for each run (about 15
// µs of CPU, and more on a busy machine). The first few spawns check it
// against /proc, and should one disagree, /proc is read from then on.
const (
	userHZ          = 100
	ticksChecks     = 3 // spawns checked against /proc
	tickMarginNanos = 50_000
)

var (
	ticksChecked atomic.Int32
	ticksWrong   atomic.Bool
)

// bootTime reads CLOCK_BOOTTIME, in nanoseconds (0 if it cannot).
func bootTime() int64 {
	var ts unix.Timespec
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, unix.CLOCK_BOOTTIME, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return ts.Nano()
}

// forkTicks is the start time, in ticks, of a process forked between the
// boot-time readings before and after, or 0 if they (give or take a
// margin) straddle a tick.
func forkTicks(before, after int64) uint64 {
	const nanosPerTick = int64(time.Second) / userHZ
	first, last := (before-tickMarginNanos)/nanosPerTick, (after+tickMarginNanos)/nanosPerTick
	if before <= 0 || first != last {
		return 0
	}
	return uint64(first)
}

// identity is ProcessOf(pr.pid), from startTicks when they are known.
func (pr *process) identity() (events.PluginProcess, error) {
	if pr.startTicks == 0 || ticksWrong.Load() {
		return ProcessOf(pr.pid)
	}
	if ticksChecked.Load() < ticksChecks {
		proc, err := ProcessOf(pr.pid)
		if err == nil {
			if proc.StartTicks == pr.startTicks {
				ticksChecked.Add(1)
			} else {
				ticksWrong.Store(true)
			}
		}
		return proc, err
	}
	boot, err := bootID()
	if err != nil {
		return events.PluginProcess{}, err
	}
	return events.PluginProcess{PGID: pr.pid, StartTicks: pr.startTicks, BootID: boot}, nil
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

// wait handles what comes (output, the exit, room in stdin) until done
// reports true (true), or until deadline (zero: none), a wake or stdout
// going over its cap (false).
func (pr *process) wait(deadline time.Time, done func() bool) bool {
	rc, err := pr.ep.SyscallConn()
	if err != nil || pr.ep.SetReadDeadline(deadline) != nil {
		return done() // never: it is pollable (startProcess made sure)
	}
	if pr.woken.Load() {
		return false // a wake came before this deadline was set
	}
	reached := false
	err = rc.Read(func(uintptr) bool {
		attention := pr.handle()
		reached = done()
		return reached || attention
	})
	return err == nil && reached
}

// handle takes the events that are ready, without waiting: reads stdout and
// stderr (closing each at its end), notes the exit, writes more of the
// request. It reports whether stdout went over its cap.
func (pr *process) handle() (overflowed bool) {
	var ready [4]unix.EpollEvent
	for {
		n, errno := rawEpollWait(pr.epfd, ready[:])
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 || n == 0 {
			return pr.overflowed
		}
		for _, ev := range ready[:n] {
			switch fd := int(ev.Fd); {
			case fd == pr.exitFd:
				pr.checkExit()
			case fd == pr.stdin:
				pr.writeRequest()
			case fd == pr.pipes[0].fd:
				pr.read(&pr.pipes[0])
			case fd == pr.pipes[1].fd:
				pr.read(&pr.pipes[1])
			case fd == pr.control.fd:
				pr.readControl(controlReadsPerWake)
			}
		}
		if n < len(ready) {
			return pr.overflowed
		}
	}
}

// checkExit sets exited if the leader has exited, and then stops watching
// for it.
func (pr *process) checkExit() {
	if pr.exitPipe {
		var b [1]byte
		n, errno := rawRead(pr.exitFd, b[:])
		pr.exited = n == 0 && errno == 0 // end of file: the waiter closed it
	} else {
		var info unix.Siginfo
		_, _, errno := syscall.RawSyscall6(syscall.SYS_WAITID, unix.P_PID, uintptr(pr.pid), uintptr(unsafe.Pointer(&info)), unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, 0, 0)
		// Exited (Signo is SIGCHLD), or nothing left to wait for: done.
		// Still running (or EINTR): wait for the pidfd.
		pr.exited = (errno == 0 && info.Signo != 0) || (errno != 0 && errno != syscall.EINTR)
	}
	if pr.exited {
		pr.unwatch(pr.exitFd) // it stays readable: watching it would only spin
	}
}

// unwatch removes fd from the run's epoll instance before it is closed
// (closing it would not, while a process forked meanwhile by another
// goroutine still holds a copy).
func (pr *process) unwatch(fd int) {
	_ = unix.EpollCtl(pr.epfd, unix.EPOLL_CTL_DEL, fd, nil)
}

// read reads p until the pipe is empty; at its end, p is closed.
func (pr *process) read(p *pipeReader) {
	chunk := *pr.buf
	for p.fd >= 0 {
		n, errno := rawRead(p.fd, chunk)
		switch {
		case n > 0:
			if p.capt.write(chunk[:n]) && p == &pr.pipes[0] {
				pr.overflowed = true
			}
		case errno == syscall.EINTR:
		case errno == syscall.EAGAIN:
			return
		default: // end of file (or a read error: nothing more to get)
			pr.closePipe(p)
		}
	}
}

// readControl reads the control channel, at most reads times, until it is
// empty; at its end, it is closed.
func (pr *process) readControl(reads int) {
	chunk := *pr.buf
	for c := &pr.control; c.fd >= 0 && reads > 0; {
		n, errno := rawRead(c.fd, chunk)
		switch {
		case n > 0:
			reads--
			c.write(chunk[:n])
		case errno == syscall.EINTR:
		case errno == syscall.EAGAIN:
			return
		default: // end of file (or a read error: nothing more to get)
			c.end()
			pr.closeControl()
		}
	}
}

// drainControl reads what the control channel holds once the plugin has
// exited, without waiting for its end (a process outside the group may
// hold it open), and closes it. What it holds is at most a pipe's buffer,
// unless something still writes: then the reads stop after a bound.
func (pr *process) drainControl() {
	const drainReads = 64 // 2 MiB in 32 KiB reads
	if pr.control.fd < 0 {
		return
	}
	pr.readControl(drainReads)
	pr.control.end() // a last line without its newline
	pr.closeControl()
}

// closeControl stops reading the control channel.
func (pr *process) closeControl() {
	if pr.control.fd >= 0 {
		pr.unwatch(pr.control.fd)
		rawClose(pr.control.fd)
		pr.control.fd = -1
	}
}

// closePipe stops reading p (closing it also ends its watch).
func (pr *process) closePipe(p *pipeReader) {
	if p.fd >= 0 {
		pr.unwatch(p.fd)
		rawClose(p.fd)
		p.fd = -1
		p.capt.close()
	}
}

// wake makes supervise look at ctx now.
func (pr *process) wake() {
	pr.woken.Store(true)
	_ = pr.ep.SetReadDeadline(time.Unix(1, 0))
}

// send writes the request to the plugin's stdin and closes it (nil: closes
// it unwritten). What the pipe cannot take at once is written as the
// plugin reads it, while the run waits. An error (EPIPE: the plugin exited
// without reading) is not an outcome; the exit status and stdout decide.
func (pr *process) send(payload []byte) {
	pr.request = payload
	pr.writeRequest()
	if pr.stdin >= 0 {
		// Cannot fail on a fresh epoll instance and a pipe.
		_ = unix.EpollCtl(pr.epfd, unix.EPOLL_CTL_ADD, pr.stdin, &unix.EpollEvent{Events: unix.EPOLLOUT, Fd: int32(pr.stdin)})
	}
}

// writeRequest writes what the pipe takes of the rest of the request, and
// closes stdin once it is all written (or cannot be).
func (pr *process) writeRequest() {
	for len(pr.request) > 0 {
		n, errno := rawWrite(pr.stdin, pr.request)
		if n > 0 {
			pr.request = pr.request[n:]
		}
		if errno == syscall.EINTR {
			continue
		}
		if errno == syscall.EAGAIN {
			return // the pipe is full: the rest waits for the plugin to read
		}
		if errno != 0 {
			break
		}
	}
	pr.closeStdin()
}

// closeStdin closes the plugin's stdin (which also ends its watch).
func (pr *process) closeStdin() {
	if pr.stdin >= 0 {
		pr.unwatch(pr.stdin)
		rawClose(pr.stdin)
		pr.stdin = -1
		pr.request = nil
	}
}

// supervise waits for the leader to exit, enforcing the timeout, ctx and the
// stdout cap. It returns why the runner terminated the group (timeout or
// canceled; "" if it did not) and whether SIGKILL had to follow SIGTERM.
func (pr *process) supervise(ctx context.Context, opts RunOptions) (reason events.Outcome, escalated bool) {
	stop := context.AfterFunc(ctx, pr.wake)
	defer stop()
	deadline := time.Now().Add(opts.Timeout)
	var graceEnd time.Time // set once SIGTERM has been sent
	exited := func() bool { return pr.exited }
	for {
		next := deadline
		if reason != "" {
			next = graceEnd
		}
		if pr.wait(next, exited) {
			return reason, escalated
		}
		// A wake, stdout over its cap, or the deadline. Exited meanwhile,
		// the outcome is the plugin's.
		pr.woken.Store(false)
		if pr.handle(); pr.exited {
			return reason, escalated
		}
		if pr.overflowed {
			pr.overflowed = false
			pr.signal(syscall.SIGKILL)
		}
		now := time.Now()
		switch {
		case reason == "" && ctx.Err() != nil:
			reason = events.OutcomeCanceled
		case reason == "" && !now.Before(deadline):
			reason = events.OutcomeTimeout
		case reason != "" && !escalated && !graceEnd.IsZero() && !now.Before(graceEnd):
			escalated = true
			pr.signal(syscall.SIGKILL)
			graceEnd = time.Time{} // wait for the exit, with no deadline
			continue
		default:
			continue
		}
		pr.signal(syscall.SIGTERM)
		graceEnd = now.Add(opts.Grace)
	}
}

// waitExited waits for the leader to exit, whatever comes meanwhile.
func (pr *process) waitExited() {
	for !pr.wait(time.Time{}, func() bool { return pr.exited }) {
		pr.woken.Store(false)
		pr.overflowed = false
	}
}

// finish runs once the leader has exited: it kills what is left of the
// group, reaps the leader (reaped is false if it could not), and reads the
// pipes to their end, for at most waitDelay (drained is false when they
// were given up on then). It releases all the run holds.
func (pr *process) finish(waitDelay time.Duration) (status syscall.WaitStatus, reaped, drained bool) {
	// The leader is a zombie, so the group id is still ours to signal.
	pr.signal(syscall.SIGKILL)
	status, reaped = reap(pr.pid)
	pr.drainControl()

	// A process that left the group may hold the pipes open: they are
	// read until then.
	closed := func() bool { return pr.pipes[0].fd < 0 && pr.pipes[1].fd < 0 }
	deadline := time.Now().Add(waitDelay)
	for !pr.wait(deadline, closed) && time.Now().Before(deadline) {
		pr.woken.Store(false) // a late wake (ctx) does not shorten waitDelay
		pr.overflowed = false
	}
	drained = true
	if !closed() {
		drained = false
		pr.closePipe(&pr.pipes[0])
		pr.closePipe(&pr.pipes[1])
	}
	pr.closeStdin()
	_ = pr.ep.Close()
	if pr.exitFd >= 0 {
		rawClose(pr.exitFd)
	}
	chunks.Put(pr.buf)
	pr.buf = nil
	if st := pr.pipes[1].capt.stream; st != nil {
		st.wait() // closed with the pipe: the last lines are being delivered
	}
	return status, reaped, drained
}

// rawEpollWait takes the events of epfd that are ready, without waiting.
func rawEpollWait(epfd int, events []unix.EpollEvent) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(unsafe.SliceData(events))), uintptr(len(events)), 0, 0, 0)
	return int(n), errno
}
