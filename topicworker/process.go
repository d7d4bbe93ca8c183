package topicworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Limits of a command's run.
const (
	// DefaultMaxOutput bounds how much of stdout and of stderr is kept
	// (each): a follow-up's body is at most 1 MiB, the note of a truncation
	// included.
	DefaultMaxOutput = 1<<20 - 256
	// DefaultKillGrace is how long the process group has between SIGTERM
	// and SIGKILL at the timeout or an interrupt.
	DefaultKillGrace = 500 * time.Millisecond
	// DefaultDrainDelay bounds how long, once the group is killed, the
	// output pipes are read for: a process that left the group (setsid)
	// and holds them is not waited for beyond it.
	DefaultDrainDelay = 2 * time.Second
)

// MetaEnvPrefix starts the name of each metadata key's variable.
const MetaEnvPrefix = "DUCTILE_META_"

// Command is what a topic worker runs for each message: Argv[0] (looked
// up on $PATH) with the rest as its arguments.
type Command struct {
	Argv []string
	// Dir is the working directory ("": the worker's).
	Dir string
	// Env is the environment the metadata variables are added to (nil:
	// the worker's own, os.Environ, without its DUCTILE_META_ variables).
	Env []string
	// Timeout bounds a run (0: none).
	Timeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL (0: DefaultKillGrace).
	KillGrace time.Duration
	// MaxOutput bounds each of stdout and stderr kept (0: DefaultMaxOutput).
	MaxOutput int
}

// Input is one message as the command gets it.
type Input struct {
	Body     string
	Metadata json.RawMessage // a JSON object, or empty
	// Vars are more variables (DUCTILE_MESSAGE_ID…), added after the
	// metadata's.
	Vars map[string]string
}

// Result is how a run ended.
type Result struct {
	ExitCode int // -1: killed by a signal, or never started
	Stdout   string
	Stderr   string
	// StdoutBytes and StderrBytes are how much the command wrote, kept or not.
	StdoutBytes, StderrBytes int64
	TimedOut                 bool
	// Interrupted: the context ended before the command did; it was killed.
	Interrupted bool
	// StartErr is why the command could not start (nil: it ran).
	StartErr error
	Duration time.Duration
}

// Run runs c once with in: the body on stdin, each metadata key K as
// DUCTILE_META_K, in a new process group. At c.Timeout, or when ctx ends,
// the whole group gets SIGTERM, then SIGKILL after c.KillGrace; when the
// command exits, whatever it left running in its group is killed too.
func (c Command) Run(ctx context.Context, in Input) Result {
	start := time.Now()
	res := c.run(ctx, in)
	res.Duration = time.Since(start)
	return res
}

func (c Command) run(ctx context.Context, in Input) Result {
	if len(c.Argv) == 0 {
		return Result{ExitCode: -1, StartErr: errors.New("no command to run: give it after --")}
	}
	env, err := c.environment(in)
	if err != nil {
		return Result{ExitCode: -1, StartErr: err}
	}
	maxOut := c.MaxOutput
	if maxOut <= 0 {
		maxOut = DefaultMaxOutput
	}
	grace := c.KillGrace
	if grace <= 0 {
		grace = DefaultKillGrace
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return Result{ExitCode: -1, StartErr: fmt.Errorf("stdout pipe: %w", err)}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return Result{ExitCode: -1, StartErr: fmt.Errorf("stderr pipe: %w", err)}
	}
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Dir, cmd.Env = c.Dir, env
	inR, inW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return Result{ExitCode: -1, StartErr: fmt.Errorf("stdin pipe: %w", err)}
	}
	// All three are files, so Wait waits for the leader only, not for
	// copies that a process it left behind could hold up.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return Result{ExitCode: -1, StartErr: fmt.Errorf("start %s: %w", c.Argv[0], err)}
	}
	pgid := cmd.Process.Pid
	stdout, stderr := &capture{max: maxOut}, &capture{max: maxOut}
	var readers sync.WaitGroup
	for _, p := range []struct {
		r *os.File
		c *capture
	}{{outR, stdout}, {errR, stderr}} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			_, _ = io.Copy(p.c, p.r)
		}()
	}
	// The body goes in from a goroutine: a command that does not read it
	// all gets EPIPE (ignored), and the write ends when the pipe is closed.
	go func() {
		_, _ = io.WriteString(inW, in.Body)
		inW.Close()
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var timeout <-chan time.Time
	if c.Timeout > 0 {
		t := time.NewTimer(c.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var res Result
	var waitErr error
	var killAt <-chan time.Time
	stopping := false
	stop := func() {
		if !stopping {
			stopping = true
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			killAt = time.After(grace)
		}
	}
	ctxDone := ctx.Done()
wait:
	for {
		select {
		case waitErr = <-exited:
			break wait
		case <-timeout:
			timeout = nil
			res.TimedOut = !stopping
			stop()
		case <-ctxDone:
			ctxDone = nil
			res.Interrupted = !stopping
			stop()
		case <-killAt:
			killAt = nil
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	// The leader is gone: nothing of its group outlives it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	inW.Close()
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(DefaultDrainDelay):
		// A process that left the group holds a pipe: stop reading.
		outR.Close()
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()
	res.Stdout, res.StdoutBytes = stdout.text(), stdout.n
	res.Stderr, res.StderrBytes = stderr.text(), stderr.n
	res.ExitCode = exitCode(waitErr)
	return res
}

// exitCode is the command's exit status, -1 when a signal ended it.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// environment is the command's environment: c.Env (or the worker's, less
// its DUCTILE_META_ variables), then one variable per metadata key, then
// in.Vars.
func (c Command) environment(in Input) ([]string, error) {
	base := c.Env
	if base == nil {
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, MetaEnvPrefix) {
				base = append(base, kv)
			}
		}
	}
	meta, err := MetaEnv(in.Metadata)
	if err != nil {
		return nil, err
	}
	env := append(append([]string{}, base...), meta...)
	names := make([]string, 0, len(in.Vars))
	for k := range in.Vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		env = append(env, k+"="+strings.ReplaceAll(in.Vars[k], "\x00", ""))
	}
	return env, nil
}

// MetaEnv is the variables of a message's metadata (a JSON object): each
// key K as DUCTILE_META_K, K upper-cased with every character but A-Z and
// 0-9 made _; a string value as it is, any other value as its JSON. Keys
// go in sorted order, so of two keys with one variable name the last in
// that order wins. NUL bytes, which no variable can hold, are dropped.
func MetaEnv(metadata json.RawMessage) ([]string, error) {
	if len(strings.TrimSpace(string(metadata))) == 0 || string(metadata) == "null" {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(metadata, &fields); err != nil {
		return nil, fmt.Errorf("the message's metadata is not a JSON object: %w", err)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		raw := fields[k]
		value := string(raw)
		var s string
		if strings.HasPrefix(value, `"`) && json.Unmarshal(raw, &s) == nil {
			value = s
		}
		out = append(out, MetaEnvName(k)+"="+strings.ReplaceAll(value, "\x00", ""))
	}
	return out, nil
}

// MetaEnvName is the variable of metadata key k: DUCTILE_META_ and k
// upper-cased, every character but A-Z and 0-9 made _.
func MetaEnvName(k string) string {
	var b strings.Builder
	b.WriteString(MetaEnvPrefix)
	for _, r := range strings.ToUpper(k) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// capture keeps the first max bytes written to it and counts them all.
type capture struct {
	mu  sync.Mutex
	max int
	buf []byte
	n   int64
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += int64(len(p))
	if room := c.max - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// text is what was kept, with a note when more was written.
func (c *capture) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n <= int64(len(c.buf)) {
		return string(c.buf)
	}
	return string(c.buf) + fmt.Sprintf("\n[ductile: output truncated: the first %d of %d bytes kept]\n", len(c.buf), c.n)
}
