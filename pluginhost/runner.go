package pluginhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
)

// Runner limits and defaults (spec §5.6).
const (
	// DefaultMaxStdout caps captured stdout (10 MiB). Going over it is a
	// protocol error and kills the process group at once.
	DefaultMaxStdout = 10 << 20
	// ExcerptBytes is how much of the start and of the end of a plugin's
	// output an excerpt keeps (32 KiB each; see Excerpt): all of its stderr
	// that is captured, and all of its stdout that is recorded when it is
	// not a valid response.
	ExcerptBytes     = 32 << 10
	DefaultGrace     = 5 * time.Second
	DefaultWaitDelay = 2 * time.Second

	// ExitConfig is EX_CONFIG from sysexits.h: a plugin exiting with it
	// reports a configuration error, which is never retried.
	ExitConfig = 78
)

// RunOptions tunes one Run. Zero values mean the defaults.
type RunOptions struct {
	// Timeout bounds the run from spawn; on expiry the process group gets
	// SIGTERM, then SIGKILL after Grace. Zero means the config's default
	// for the command (config.DefaultTimeouts).
	Timeout time.Duration
	// Grace is the wait between SIGTERM and SIGKILL (default 5s).
	Grace time.Duration
	// WaitDelay bounds how long, after the plugin has exited and its process
	// group has been killed, the runner keeps reading pipes still held open
	// by a process that left the group (default 2s).
	WaitDelay time.Duration
	// OnStart, if set, is called with the pid (which is also the process
	// group id) right after the plugin has started. It must not block.
	OnStart func(pid int)
	// OnSpawn, if set, is called with the plugin's process (its group,
	// told apart from a later process of its pid: ProcessOf) as soon as it
	// has been spawned, before the request is prepared (RunPrepared) or
	// written: a caller that records it before the plugin gets its request
	// can end the group should it die itself (EndProcessGroup). Not called
	// for an in-process step, nor when the process cannot be identified.
	OnSpawn func(events.PluginProcess)
	// OnStderr, if set, receives the lines the plugin writes to stderr
	// while it runs, coalesced: a delivery every StderrInterval while lines
	// come, or as soon as StderrChunkSize of them wait, and the last ones
	// when its stderr closes, before Run returns. Calls come one at a time,
	// in order, from a goroutine of the runner's, started only if the
	// plugin writes to stderr. They see the first ExcerptBytes of its
	// stderr (what Result.Stderr starts with), up to MaxStreamedStderr. A
	// slow OnStderr delays only later deliveries and the end of Run, never
	// the plugin.
	OnStderr func(StderrLines)
	// RunID is the run's id, given to the plugin in its environment
	// (EnvRunID): the job's id. Run defaults it to the request's JobID.
	RunID string
	// TraceID, if set, is given to the plugin in its environment
	// (EnvTraceID).
	TraceID string
	// Control, if set, receives each line the plugin writes on its control
	// channel (file descriptor ControlFD) once its request is written,
	// parsed (ControlMessage), or refused with the reason. Calls come one at
	// a time, in order, from the goroutine that called Run (on the
	// portable path, a goroutine of the run's: doc.go), while the
	// plugin runs and from a last read without waiting once it has exited
	// (a process that outlives the plugin and holds the channel open never
	// delays the result); Control must not block. Without Control the
	// lines are read and dropped.
	Control func(ControlMessage)
}

func (o RunOptions) withDefaults(command string) RunOptions {
	if o.Timeout <= 0 {
		o.Timeout = config.DefaultTimeouts().For(command)
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.WaitDelay <= 0 {
		o.WaitDelay = DefaultWaitDelay
	}
	return o
}

// Result is what one run produced. Stdout and Stderr are the captured
// (capped) bytes, kept for the job log whatever the outcome.
type Result struct {
	// Kind is how the run ended: ok, error, protocol_error, timeout or
	// canceled.
	Kind events.Outcome
	// Retryable reports whether a failed run may be retried: false after
	// exit 78 (EX_CONFIG), "retry": false, a cancellation, or a request the
	// runner could not encode; true for every other failure (timeouts and
	// protocol errors included). Always false for events.OutcomeOK.
	Retryable bool
	// Err is a human message for any Kind but ok.
	Err string
	// ExitCode is the exit status, or -1 when the process was killed by a
	// signal or never started.
	ExitCode int
	// PID of the plugin process, which is also its process group id (0 if
	// it never started).
	PID      int
	Duration time.Duration
	// Stdout is what the plugin wrote to stdout, up to DefaultMaxStdout
	// (whole, for the response to be parsed); StdoutTruncated says it went
	// over, and StdoutBytes is how much it wrote before it was stopped.
	Stdout          []byte
	StdoutTruncated bool
	StdoutBytes     int64
	// Stderr is an excerpt of what the plugin wrote to stderr (Excerpt):
	// all of it up to 2·ExcerptBytes, else its start and its end.
	// StderrTruncated says bytes were left out, and StderrBytes is how many
	// it wrote in all.
	Stderr          []byte
	StderrTruncated bool
	StderrBytes     int64
	// NotStarted reports a RunPrepared whose prepare failed: the process
	// got no request and was killed before it could act.
	NotStarted bool
	// ControlLines and ControlRefused count the lines of the control
	// channel handed to RunOptions.Control as accepted, and as refused.
	ControlLines, ControlRefused int
	// Response is the parsed response, set for events.OutcomeOK and events.OutcomeError when
	// stdout held a valid envelope; nil otherwise.
	Response *Response
}

// Run executes one command of p and returns its classified outcome. It blocks
// until the plugin and everything left in its process group are dead and
// every goroutine it started has ended; it never panics on plugin behaviour.
//
// The entrypoint runs in p.Dir with the parent's environment, in its own
// process group. The request (one compact JSON line) is written to stdin,
// which is then closed; stdout and stderr are read concurrently. The timeout
// counts from spawn; expiry or ctx cancellation sends SIGTERM to the group,
// and SIGKILL after opts.Grace if the plugin has not exited. When the plugin
// exits, whatever it left in its group is killed with SIGKILL (spawn per
// command: nothing outlives its run).
func Run(ctx context.Context, p *Plugin, req Request, opts RunOptions) Result {
	opts = opts.withDefaults(req.Command)
	if opts.RunID == "" {
		opts.RunID = req.JobID
	}
	payload, err := encodeRequest(req, opts.Timeout)
	if err != nil {
		return Result{Kind: events.OutcomeError, ExitCode: -1, Err: err.Error()}
	}
	return run(ctx, p, req.Command, func() ([]byte, error) { return payload, nil }, opts)
}

// RunPrepared is Run for a request only known once the work is claimed: it
// starts the plugin's process, then calls prepare and writes the request
// prepare returns. A caller that submits its claim before calling (as the
// dispatcher submits a job's start) has it recorded while the process
// spawns. If prepare fails, the process group is killed before it has
// received anything, and the result is events.OutcomeCanceled with NotStarted
// set. If the process cannot be started, prepare is not called
// (the result says why). The timeout counts from the moment the request is
// written.
func RunPrepared(ctx context.Context, p *Plugin, command string, prepare func() (Request, error), opts RunOptions) Result {
	opts = opts.withDefaults(command)
	return run(ctx, p, command, func() ([]byte, error) {
		req, err := prepare()
		if err != nil {
			return nil, err
		}
		return encodeRequest(req, opts.Timeout)
	}, opts)
}

// encodeRequest is the request line, with deadline_at set from timeout when
// the caller left it unset.
func encodeRequest(req Request, timeout time.Duration) ([]byte, error) {
	if req.DeadlineAt.IsZero() {
		req.DeadlineAt = time.Now().Add(timeout)
	}
	payload, err := req.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return payload, nil
}

// run starts the process, then gets the request bytes from payload.
func run(ctx context.Context, p *Plugin, command string, payload func() ([]byte, error), opts RunOptions) Result {
	start := time.Now()
	res := Result{ExitCode: -1}
	finish := func() Result {
		res.Duration = time.Since(start)
		return res
	}

	if err := ctx.Err(); err != nil {
		res.Kind, res.Err = events.OutcomeCanceled, "canceled before start: "+err.Error()
		return finish()
	}
	if p.Step != nil {
		res = runStep(ctx, p.Step, payload)
		return finish()
	}
	pr, err := startProcess(p, opts.OnStderr, opts.RunID, opts.TraceID)
	if err != nil {
		res.Kind, res.Err, res.Retryable = events.OutcomeError, err.Error(), true
		return finish()
	}
	res.PID = pr.pid
	if opts.OnSpawn != nil {
		// The leader is not reaped before finish: its pid is still its own.
		if proc, err := pr.identity(); err == nil {
			opts.OnSpawn(proc)
		}
	}

	request, err := payload()
	if err != nil {
		// Nothing was written to the plugin: end it before it can act (kill
		// first, so it never even sees its stdin close).
		pr.signal(syscall.SIGKILL)
		pr.send(nil)
		pr.waitExited()
		pr.finish(opts.WaitDelay)
		res.Kind, res.Err, res.NotStarted = events.OutcomeCanceled, "not started: "+err.Error(), true
		return finish()
	}
	pr.control.deliver = opts.Control
	pr.send(append(request, '\n'))
	if opts.OnStart != nil {
		opts.OnStart(pr.pid)
	}

	reason, escalated := pr.supervise(ctx, opts)
	status, reaped, drained := pr.finish(opts.WaitDelay)

	stdout, stderr := pr.pipes[0].capt, pr.pipes[1].capt
	res.Stdout, res.StdoutTruncated, res.StdoutBytes = stdout.buf, stdout.truncated, stdout.total
	res.Stderr, res.StderrTruncated = stderr.excerpt()
	res.StderrBytes = stderr.total
	res.ControlLines, res.ControlRefused = pr.control.accepted, pr.control.refused
	var exit *syscall.WaitStatus
	if reaped {
		exit = &status
		res.ExitCode = status.ExitStatus()
	}
	classify(&res, exit, reason, escalated, opts)
	if res.Kind == events.OutcomeError && res.Response == nil {
		res.Err += exitHint(p.Entrypoint, res.ExitCode)
	}
	if !drained && res.Err != "" {
		res.Err += fmt.Sprintf(" (output pipes still held open by a process outside the group; closed after %v)", opts.WaitDelay)
	}
	return finish()
}

// runStep runs an in-process step where run would start a process: the
// request is prepared and encoded all the same, and the step's output is
// classified as the stdout of a process that exited 0.
func runStep(ctx context.Context, step Step, payload func() ([]byte, error)) Result {
	res := Result{ExitCode: -1}
	request, err := payload()
	if err != nil {
		res.Kind, res.Err, res.NotStarted = events.OutcomeCanceled, "not started: "+err.Error(), true
		return res
	}
	stdout, err := step(ctx, request)
	if err != nil {
		res.Kind, res.Err, res.Retryable = events.OutcomeError, err.Error(), true
		return res
	}
	res.ExitCode, res.Stdout, res.StdoutBytes = 0, stdout, int64(len(stdout))
	resp, perr := ParseResponse(stdout)
	classifyResponse(&res, resp, perr)
	return res
}

// capture keeps the first max bytes read from a pipe and, if tailMax is
// set, the last tailMax bytes after those, and drains the rest.
type capture struct {
	max       int
	buf       []byte
	tailMax   int
	tail      []byte // the last tailMax bytes read after buf was full (at most 2·tailMax held)
	total     int64  // bytes read in all
	truncated bool   // bytes were read after buf was full
	// onStderr, if set, gets what buf keeps, through stream: made at the
	// first byte, closed at the end.
	onStderr func(StderrLines)
	stream   *stderrStream
}

// excerpt is what the capture kept (Excerpt of it), and whether bytes were
// left out.
func (c *capture) excerpt() ([]byte, bool) {
	tail := c.tail[max(0, len(c.tail)-c.tailMax):]
	if c.total == int64(len(c.buf)+len(tail)) {
		return append(c.buf, tail...), false
	}
	return excerpt(c.buf, tail, c.total), true
}

// chunks are the read buffers of runs, reused: a fresh 32 KiB buffer per
// run was most of the garbage a busy daemon made.
var chunks = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// write takes what was read next, and reports whether it is the first
// that went over max.
func (c *capture) write(chunk []byte) (overflowed bool) {
	n := len(chunk)
	c.total += int64(n)
	kept := min(n, c.max-len(c.buf))
	c.buf = append(c.buf, chunk[:kept]...)
	if c.tailMax > 0 && kept < n {
		if len(c.tail)+n-kept > 2*c.tailMax {
			// Keep only what may still be among the last tailMax bytes.
			keep := max(0, c.tailMax-(n-kept))
			c.tail = append(c.tail[:0], c.tail[len(c.tail)-min(keep, len(c.tail)):]...)
		}
		c.tail = append(c.tail, chunk[kept:n]...)
	}
	if kept > 0 && c.onStderr != nil {
		if c.stream == nil {
			c.stream = newStderrStream(c.onStderr)
		}
		c.stream.write(chunk[:kept])
	}
	if kept < n && !c.truncated {
		c.truncated = true
		return true
	}
	return false
}

// close marks the end of what is read.
func (c *capture) close() {
	if c.stream != nil {
		c.stream.close(c.truncated)
	}
}

// classify sets res's outcome from how the plugin exited (exit: nil if it
// could not be reaped), why the runner ended it (reason) and its stdout.
func classify(res *Result, exit *syscall.WaitStatus, reason events.Outcome, escalated bool, opts RunOptions) {
	switch reason {
	case events.OutcomeTimeout:
		res.Kind, res.Retryable = events.OutcomeTimeout, true
		res.Err = fmt.Sprintf("timed out after %v", opts.Timeout)
		if escalated {
			res.Err += fmt.Sprintf("; SIGKILL after %v grace", opts.Grace)
		}
		return
	case events.OutcomeCanceled:
		res.Kind, res.Retryable = events.OutcomeCanceled, false
		res.Err = "canceled"
		if escalated {
			res.Err += fmt.Sprintf("; SIGKILL after %v grace", opts.Grace)
		}
		return
	}
	if res.StdoutTruncated {
		res.Kind, res.Retryable = events.OutcomeProtocolError, true
		res.Err = fmt.Sprintf("stdout exceeded %d bytes; plugin killed", DefaultMaxStdout)
		return
	}

	resp, perr := ParseResponse(res.Stdout)
	if exit := describeExit(exit); exit != "" { // non-zero exit or killed by a signal
		res.Kind, res.Retryable = events.OutcomeError, res.ExitCode != ExitConfig
		if perr == nil {
			res.Response = resp
			if resp.Retry != nil && !*resp.Retry {
				res.Retryable = false
			}
			if resp.Status == StatusError && resp.Error != "" {
				res.Err = fmt.Sprintf("%s (%s)", resp.Error, exit)
			} else {
				res.Err = fmt.Sprintf("%s after status %q", exit, resp.Status)
			}
		} else {
			res.Err = exit
		}
		if tail := stderrTail(res.Stderr); tail != "" {
			res.Err += ": " + tail
		}
		return
	}

	classifyResponse(res, resp, perr)
}

// classifyResponse classifies the stdout of a clean exit, parsed into resp
// (or perr).
func classifyResponse(res *Result, resp *Response, perr error) {
	if perr != nil {
		res.Kind, res.Retryable = events.OutcomeProtocolError, true
		res.Err = "protocol error: " + perr.Error()
		return
	}
	res.Response = resp
	if resp.Status == StatusOK {
		res.Kind = events.OutcomeOK
		return
	}
	res.Kind, res.Retryable = events.OutcomeError, resp.Retry == nil || *resp.Retry
	res.Err = resp.Error
	if res.Err == "" {
		res.Err = "plugin reported an error without a message"
	}
}

// describeExit returns "" for a clean exit 0, else "exit N" or
// "killed by signal S".
func describeExit(ws *syscall.WaitStatus) string {
	if ws == nil {
		return "no exit status"
	}
	if ws.Signaled() {
		return "killed by signal " + ws.Signal().String()
	}
	if code := ws.ExitStatus(); code != 0 {
		return fmt.Sprintf("exit %d", code)
	}
	return ""
}

// stderrTail returns the last line-ish part of stderr for error messages.
func stderrTail(b []byte) string {
	const max = 512
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		s = s[len(s)-max:]
		for len(s) > 0 && !utf8.RuneStart(s[0]) {
			s = s[1:]
		}
		s = "…" + s
	}
	return s
}

// interpreterHint explains why the kernel refused to exec an entrypoint
// that exists, from its first line: ENOENT means the interpreter on its #!
// line is missing (often only because the line ends with the \r of a file
// with Windows line endings), ENOEXEC that it has no #! line at all.
func interpreterHint(entrypoint string, err error) string {
	noent, noexec := errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOEXEC)
	if !noent && !noexec {
		return ""
	}
	line, ok := firstLine(entrypoint)
	if !ok {
		return ""
	}
	if hint := lineEndingHint(entrypoint, line); hint != "" {
		return hint
	}
	if bytes.HasPrefix(line, []byte("\xef\xbb\xbf#!")) {
		return fmt.Sprintf(" (it starts with a byte-order mark before its #! line: save it as UTF-8 without a BOM, e.g. sed -i '1s/^\\xEF\\xBB\\xBF//' %s)", entrypoint)
	}
	interp, isScript := bytes.CutPrefix(line, []byte("#!"))
	switch {
	case isScript && noent:
		return fmt.Sprintf(" (the interpreter on its #! line, %q, was not found: install it or fix the line)", strings.TrimSpace(string(interp)))
	case !isScript && noexec && bytes.HasPrefix(line, []byte("\x7fELF")):
		return " (it is a binary for another architecture or system: build it for this one)"
	case !isScript && noexec:
		return fmt.Sprintf(" (it has no #! line, so the system cannot tell what runs it: make its first line name the interpreter, e.g. #!/bin/sh, and see: head -n 1 %s)", entrypoint)
	}
	return ""
}

// exitHint explains a plugin that exited 126 or 127 (what a shell or env
// exits with when it cannot find or run a command) when its #! line ends
// with a \r: "#!/usr/bin/env sh\r" makes env look for "sh\r".
func exitHint(entrypoint string, exitCode int) string {
	if exitCode != 126 && exitCode != 127 {
		return ""
	}
	line, ok := firstLine(entrypoint)
	if !ok {
		return ""
	}
	return lineEndingHint(entrypoint, line)
}

// lineEndingHint says what is wrong with a #! line that ends with a \r,
// and how to fix it; "" for any other line.
func lineEndingHint(entrypoint string, line []byte) string {
	if !bytes.HasPrefix(line, []byte("#!")) || !bytes.HasSuffix(line, []byte("\r")) {
		return ""
	}
	return fmt.Sprintf(" (its #! line, %q, ends with a carriage return that the system takes as part of the name to run: the file has Windows (CRLF) line endings; convert them with sed -i 's/\\r$//' %s)",
		line, entrypoint)
}

// firstLine is the entrypoint's first line (without its \n; at most 256
// bytes), and false if it cannot be read.
func firstLine(entrypoint string) ([]byte, bool) {
	f, err := os.Open(entrypoint)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	buf := make([]byte, 256)
	n, err := io.ReadFull(f, buf)
	if n == 0 && err != nil {
		return nil, false
	}
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	return line, true
}
