package main_test

// TestGettingStarted follows docs/getting-started.md as a reader would, on a
// scratch home: it runs the commands of its shell and console blocks with
// the real binary (a real daemon where the guide starts one, stopped with
// SIGINT where it says Ctrl-C), writes the files it shows, and compares
// each command's output with the output the guide prints, once what
// differs from run to run is masked (ids, times, pids, seqs, durations,
// sizes). Ids, keys and seqs the guide's later commands reuse are learned
// from the outputs they first appear in, so `job inspect <id>` names the
// job this run made.
//
// What the guide cannot say in its text is said in HTML comments before a
// block, which a reader does not see:
//
//	<!-- tour: write PATH -->    the block is the whole file PATH (under ~/ductile-tour)
//	<!-- tour: append PATH -->   the block is added to the end of PATH
//	<!-- tour: log -->           the block is lines the daemon logged (found in its output, in order)
//	<!-- tour: exact -->         the daemon's lines up to "ductile started" are exactly these
//	<!-- tour: varies -->        run the commands, report no difference: the output depends on timing
//	                             (what matches still names the ids later commands use)
//	<!-- tour: until CMD => TEXT --> first wait until CMD prints TEXT (a schedule's firing)
//	<!-- tour: skip -->          not run (the test does it another way, said next to it)
//	<!-- tour: needs PROGRAM --> run only when PROGRAM is installed (sqlite3)
//
// The test departs from the guide in three places, each to stay hermetic:
// the binary is this test's build (the guide's `go build` line is not run);
// every ductile command gets --log-format text, the readable lines a
// terminal shows; and the API listens on a free port (api.listen
// 127.0.0.1:0, in a file of the test's until the guide writes config.yaml,
// then added to it), which curl commands are pointed at.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// guideBlock is one fenced block of the guide, with the directives before it.
type guideBlock struct {
	line       int    // of its opening fence, for messages
	section    string // the heading it is under
	lang       string
	text       []string
	directives []string
}

// parseGuide splits the guide into its fenced blocks.
func parseGuide(t *testing.T, path string) []guideBlock {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var blocks []guideBlock
	var cur *guideBlock
	var section string
	var directives []string
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text = append(cur.text, line)
		case strings.HasPrefix(line, "```"):
			cur = &guideBlock{line: i + 1, section: section, lang: strings.TrimPrefix(line, "```"), directives: directives}
			directives = nil
		case strings.HasPrefix(line, "## "):
			section = line
		case strings.HasPrefix(line, "<!-- tour: "):
			directives = append(directives, strings.TrimSuffix(strings.TrimPrefix(line, "<!-- tour: "), " -->"))
		}
	}
	require.Nil(t, cur, "an unclosed block")
	return blocks
}

func (b guideBlock) directive(name string) (string, bool) {
	for _, d := range b.directives {
		if d == name {
			return "", true
		}
		if arg, ok := strings.CutPrefix(d, name+" "); ok {
			return arg, true
		}
	}
	return "", false
}

// tour is the state of a reader following the guide: the shell's
// environment and directory, the daemon of terminal 1, and what was learned.
type tour struct {
	t          *testing.T
	home, cwd  string
	env        map[string]string // exported in the reader's shells
	lastCode   int               // $? of the last command
	daemon     *proc             // terminal 1, while it runs
	daemonHang bool              // started with ECHO_MODE=hang: its jobs never finish
	learned    map[string]string // the guide's ids, keys and port -> this run's
	seqs       map[string]string // the guide's seqs -> this run's
}

// guideCommandTimeout bounds one command of the guide (plugin run --wait of
// a failing job takes a few seconds).
const guideCommandTimeout = 60 * time.Second

// guideWait bounds a wait for a daemon's line, a settled queue or an until.
const guideWait = 60 * time.Second

func TestGettingStarted(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	g := &tour{t: t, home: home, cwd: home, learned: map[string]string{}, seqs: map[string]string{}}
	// The binary this test built, as the guide's ~/bin/ductile, with the
	// log lines a terminal shows.
	bin := filepath.Join(home, "bin", "ductile")
	require.NoError(t, os.MkdirAll(filepath.Dir(bin), 0o755))
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\nexec "+ductileBin+" --log-format text \"$@\"\n"), 0o755))
	g.env = map[string]string{"HOME": home, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "dumb", "TZ": "UTC"}
	for _, kv := range cleanEnv(t) {
		if name, value, _ := strings.Cut(kv, "="); name == "XDG_STATE_HOME" || name == "TMPDIR" || name == "GOCOVERDIR" {
			g.env[name] = value
		}
	}
	// Until the guide writes its config, the API's port comes from a file
	// of the test's.
	apiOnly := filepath.Join(t.TempDir(), "api.yaml")
	require.NoError(t, os.WriteFile(apiOnly, []byte(apiListen), 0o600))
	g.env["DUCTILE_CONFIG"] = apiOnly
	t.Cleanup(g.cleanup)

	// A difference fails the test and the tour goes on, so that one run
	// shows every drift (a later one may follow from an earlier one).
	for _, b := range parseGuide(t, filepath.Join("..", "..", "docs", "getting-started.md")) {
		g.block(b)
	}
	require.Nil(t, g.daemon, "the guide ends with the daemon stopped")
}

// apiListen is what the test adds to the guide's config: a free port.
const apiListen = "api: {listen: \"127.0.0.1:0\"}\n"

func (g *tour) block(b guideBlock) {
	t := g.t
	t.Helper()
	where := fmt.Sprintf("getting-started.md:%d (%s)", b.line, b.section)
	if _, ok := b.directive("skip"); ok {
		return
	}
	if prog, ok := b.directive("needs"); ok {
		if _, err := exec.LookPath(prog); err != nil {
			t.Logf("%s: skipped: %s is not installed", where, prog)
			return
		}
	}
	if until, ok := b.directive("until"); ok {
		cmd, want, found := strings.Cut(until, " => ")
		require.True(t, found, "%s: until CMD => TEXT", where)
		waitFor(t, guideWait, fmt.Sprintf("%s: %s to print %s", where, cmd, want), func() bool {
			out, _ := g.shell(cmd)
			return strings.Contains(out, want)
		})
	}
	if path, ok := b.directive("write"); ok {
		g.writeFile(path, b.text, false)
		return
	}
	if path, ok := b.directive("append"); ok {
		g.writeFile(path, b.text, true)
		return
	}
	if _, ok := b.directive("log"); ok {
		require.NotNil(t, g.daemon, "%s: a daemon's log, and no daemon runs", where)
		g.daemonLines(where, b.text, 0, false)
		return
	}
	switch b.lang {
	case "sh":
		for _, line := range b.text {
			g.shLine(where, line)
		}
	case "console":
		g.console(where, b)
	}
}

// shLine runs one line of a sh block: cd, export and unset change the
// reader's shell; the guide's go build is this test's build.
func (g *tour) shLine(where, line string) {
	t := g.t
	line = strings.TrimSpace(line)
	switch fields := strings.Fields(line); {
	case line == "" || strings.HasPrefix(line, "#"):
	case fields[0] == "go" && fields[1] == "build":
	case fields[0] == "cd":
		g.cwd = g.expand(strings.Join(fields[1:], " "))
	case fields[0] == "export":
		name, value, ok := strings.Cut(strings.Join(fields[1:], " "), "=")
		require.True(t, ok, "%s: %s", where, line)
		g.env[name] = g.expand(value)
	case fields[0] == "unset":
		for _, name := range fields[1:] {
			delete(g.env, name)
		}
	default:
		out, code := g.shell(line)
		require.Equal(t, 0, code, "%s: %s:\n%s", where, line, out)
	}
}

// expand is the shell's expansion of word in the reader's environment.
func (g *tour) expand(word string) string {
	out, code := g.shell(`printf %s ` + word)
	require.Equal(g.t, 0, code, "expand %s: %s", word, out)
	return out
}

// writeFile writes (or appends) a file the guide shows, under ~/ductile-tour.
// The guide's config.yaml gets the test's api.listen.
func (g *tour) writeFile(path string, text []string, appending bool) {
	t := g.t
	full := filepath.Join(g.home, "ductile-tour", path)
	require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
	body := strings.Join(text, "\n") + "\n"
	if appending {
		old, err := os.ReadFile(full)
		require.NoError(t, err)
		body = strings.TrimSuffix(string(old), apiListen) + body
	}
	if path == "config.yaml" {
		body += apiListen
	}
	mode := os.FileMode(0o644)
	if strings.HasSuffix(path, ".sh") || strings.HasSuffix(path, ".py") {
		mode = 0o755 // the guide's chmod +x comes after; a rewrite keeps the bit
	}
	require.NoError(t, os.WriteFile(full, []byte(body), mode))
}

// guideStep is a command of a console block ($ ...) or an interrupt of the
// daemon (^C), with the lines the guide shows after it.
type guideStep struct {
	command   string
	interrupt bool
	want      []string
}

func parseConsole(lines []string) []guideStep {
	var steps []guideStep
	for _, line := range lines {
		switch {
		case strings.HasPrefix(line, "$ "):
			steps = append(steps, guideStep{command: strings.TrimPrefix(line, "$ ")})
		case strings.HasPrefix(line, "^C"):
			s := guideStep{interrupt: true}
			if rest := strings.TrimPrefix(line, "^C"); rest != "" && rest != "…" {
				s.want = []string{rest}
			}
			steps = append(steps, s)
		case len(steps) > 0:
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, line)
		}
	}
	return steps
}

// startCommand matches a command that starts the daemon.
var startCommand = regexp.MustCompile(`^((?:[A-Z_]+=\S+ )*)ductile (?:.* )?system start\b`)

// assignment matches a shell variable set on its own: KEY=value # comment.
var assignment = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=(\S*)\s*(?:#.*)?$`)

func (g *tour) console(where string, b guideBlock) {
	_, varies := b.directive("varies")
	_, exact := b.directive("exact")
	for _, s := range parseConsole(b.text) {
		if s.interrupt {
			g.stopDaemon(where, s.want, varies)
			continue
		}
		command := g.substitute(s.command)
		if m := assignment.FindStringSubmatch(command); m != nil {
			g.env[m[1]] = m[2]
			continue
		}
		if m := startCommand.FindStringSubmatch(command); m != nil {
			g.startDaemon(where, m[1], strings.TrimPrefix(command, m[1]), s.want, varies, exact)
			continue
		}
		if strings.HasPrefix(command, "ductile ") {
			g.settle(where)
		}
		out, code := g.shell(command)
		g.lastCode = code
		g.match(where+": $ "+s.command, s.want, splitLines(out), !varies)
		if g.daemon != nil && strings.Contains(command, "kill") {
			g.reap(where) // the command may have killed the daemon
		}
	}
}

// shell runs command in bash in the reader's environment and directory,
// with $? the last command's status; it returns stdout and stderr as they
// came, and the exit status.
func (g *tour) shell(command string) (string, int) {
	t := g.t
	ctx, cancel := context.WithTimeout(context.Background(), guideCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", fmt.Sprintf("(exit %d); %s", g.lastCode, command))
	cmd.Dir, cmd.Env = g.cwd, g.environ()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "%s did not finish within %v:\n%s", command, guideCommandTimeout, out.String())
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %s: %v", command, err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// environ is the reader's exported variables, with ~/bin first on PATH
// (where the guide builds ductile).
func (g *tour) environ() []string {
	env := []string{}
	for name, value := range g.env {
		if name == "PATH" {
			value = filepath.Join(g.home, "bin") + ":" + value
		}
		env = append(env, name+"="+value)
	}
	return env
}

// settle waits, before a command, until the daemon has run every job it can
// (none queued or running, and the projections have applied the log): a
// reader types slower than echo runs, and the guide's outputs assume it.
// A daemon of hung jobs is never settled: it is left alone.
func (g *tour) settle(where string) {
	if g.daemon == nil || g.daemonHang {
		return
	}
	waitFor(g.t, guideWait, where+": the daemon to finish its jobs", func() bool {
		var stats struct {
			Lag int64 `json:"projector_lag"`
		}
		out, code := g.shell("ductile ledger stats --json 2>/dev/null")
		if code != 0 || json.Unmarshal([]byte(out), &stats) != nil || stats.Lag != 0 {
			return false
		}
		var q struct {
			Counts map[string]int64 `json:"counts"`
		}
		out, code = g.shell("ductile queue --json 2>/dev/null")
		return code == 0 && json.Unmarshal([]byte(out), &q) == nil && q.Counts["queued"]+q.Counts["running"]+q.Counts["cancel_requested"] == 0
	})
}

// startDaemon runs a system start as terminal 1 does. A start that fails
// (a damaged ledger) is compared as any command; a daemon is left running,
// and the lines the guide shows are found in its log as they come.
func (g *tour) startDaemon(where, assignments, command string, want []string, varies, exact bool) {
	t := g.t
	require.Nil(t, g.daemon, "%s: a daemon runs already", where)
	g.killStrays() // a plugin a killed daemon left behind (the guide's pgrep and kill)
	hang := strings.Contains(assignments, "ECHO_MODE=hang")
	command = assignments + command
	cmd := exec.Command("bash", "-c", assignments+"exec "+strings.TrimPrefix(command, assignments)+" 2>&1")
	cmd.Dir, cmd.Env = g.cwd, g.environ()
	p := &proc{cmd: cmd, grew: make(chan struct{}), done: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go p.read(stdout)
	_, i := p.waitLineOrExit(t, guideWait, 0, isStarted)
	if i < 0 { // it exited: a start refused
		g.lastCode = p.cmd.ProcessState.ExitCode()
		lines, _ := p.snapshot()
		if !varies {
			g.compare(where+": $ "+command, want, lines)
		}
		return
	}
	g.daemon, g.daemonHang = p, hang
	if m := regexp.MustCompile(`api: listening .*addr=127\.0\.0\.1:(\d+)`).FindStringSubmatch(strings.Join(must(p.snapshot()), "\n")); m != nil {
		g.learned["127.0.0.1:8080"] = "127.0.0.1:" + m[1]
		g.learned["localhost:8080"] = "localhost:" + m[1]
	}
	if !varies {
		g.daemonLines(where+": $ "+command, want, 0, exact)
	}
}

func must[T any, U any](v T, _ U) T { return v }

// isStarted matches the daemon's line that says it has started.
func isStarted(line string) bool { return strings.Contains(line, " ductile started ") }

// reap forgets the daemon once a command killed it (kill -9 in step 11),
// waiting a moment for the process to be gone.
func (g *tour) reap(where string) {
	select {
	case <-g.daemon.done:
		g.daemon, g.daemonHang = nil, false
	case <-time.After(5 * time.Second): // still running: it was not the daemon that was killed
	}
}

// stopDaemon is Ctrl-C in terminal 1: SIGINT, and the daemon's last lines.
func (g *tour) stopDaemon(where string, want []string, varies bool) {
	t := g.t
	require.NotNil(t, g.daemon, "%s: ^C and no daemon runs", where)
	from := len(must(g.daemon.snapshot()))
	require.NoError(t, g.daemon.cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-g.daemon.done:
	case <-time.After(guideWait):
		t.Fatalf("%s: the daemon did not stop after SIGINT", where)
	}
	if !varies {
		g.daemonLines(where+": ^C", want, from, false)
	}
	g.daemon, g.daemonHang = nil, false
}

// daemonLines finds the lines the guide shows in the daemon's log from line
// from on, in order, waiting for each: the guide shows some of them ("…"
// stands for the rest). With exact, the lines up to the guide's last one are
// exactly the guide's.
func (g *tour) daemonLines(where string, want []string, from int, exact bool) {
	t := g.t
	p := g.daemon
	if p == nil {
		return
	}
	// wait is waitLineOrExit, saying what it waited for if it gives up.
	wait := func(what string, match func(string) bool) (string, int) {
		found := false
		defer func() {
			if !found {
				t.Logf("%s: waited for the daemon to log %s", where, what)
			}
		}()
		line, i := p.waitLineOrExit(t, guideWait, from, match)
		found = true
		return line, i
	}
	if exact {
		_, i := wait("ductile started", isStarted)
		require.GreaterOrEqual(t, i, 0, "%s: the daemon exited before it started", where)
		g.compare(where, want, must(p.snapshot())[from:i+1])
		return
	}
	for _, w := range want {
		if strings.TrimSpace(w) == "…" || strings.TrimSpace(w) == "" {
			continue
		}
		pattern := g.pattern(w)
		line, i := wait(w, func(line string) bool { return pattern.matches(g.mask(line)) })
		if i < 0 {
			t.Errorf("%s: the daemon never logged\n  %s\nits log:\n%s", where, w, strings.Join(must(p.snapshot()), "\n"))
			return
		}
		g.learn(w, line)
		from = i + 1
	}
}

// cleanup stops what the tour left running: the daemon, and any plugin
// process of the tour (found by its HOME).
func (g *tour) cleanup() {
	if g.daemon != nil {
		_ = g.daemon.cmd.Process.Kill()
		<-g.daemon.done
		if g.t.Failed() {
			g.t.Logf("daemon log:\n%s", strings.Join(must(g.daemon.snapshot()), "\n"))
		}
	}
	g.killStrays()
}

// killStrays kills every process whose environment has this tour's HOME
// (a plugin a SIGKILLed daemon left behind).
func (g *tour) killStrays() {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && slices.ContainsFunc(bytes.Split(environ, []byte{0}), func(kv []byte) bool { return string(kv) == "HOME="+g.home }) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func splitLines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// compare matches a command's output with the guide's lines: line by line,
// once masked; a line of the guide holding "…" stands for any text there,
// and a line that is "…" alone for any number of lines.
func (g *tour) compare(what string, want, got []string) {
	g.t.Helper()
	g.match(what, want, got, true)
}

// match is compare; without report, a difference only ends the matching.
func (g *tour) match(what string, want, got []string, report bool) {
	t := g.t
	t.Helper()
	w, i := 0, 0
	skip := false
	fail := func(why string) {
		if !report {
			return
		}
		t.Errorf("%s: %s\nthe guide shows:\n%s\nthe command printed:\n%s", what, why, strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
	for ; w < len(want); w++ {
		if strings.TrimSpace(want[w]) == "…" {
			skip = true
			continue
		}
		pattern := g.pattern(want[w])
		for {
			if i >= len(got) {
				fail(fmt.Sprintf("no line for the guide's %q", want[w]))
				return
			}
			if pattern.matches(g.mask(got[i])) {
				g.learn(want[w], got[i])
				i++
				break
			}
			if !skip {
				fail(fmt.Sprintf("line %d differs:\n  guide: %s\n  got:   %s\n  (masked: %q vs %q)", i+1, want[w], got[i], pattern, g.mask(got[i])))
				return
			}
			i++
		}
		skip = false
	}
	if i < len(got) && !skip {
		fail(fmt.Sprintf("%d more line(s) than the guide shows, from %q", len(got)-i, got[i]))
	}
}

// linePattern is a masked line of the guide split at its "…".
type linePattern []string

func (p linePattern) matches(s string) bool {
	if len(p) == 1 {
		return s == p[0]
	}
	if !strings.HasPrefix(s, p[0]) {
		return false
	}
	s = s[len(p[0]):]
	for _, part := range p[1 : len(p)-1] {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return strings.HasSuffix(s, p[len(p)-1])
}

func (g *tour) pattern(line string) linePattern {
	line = strings.ReplaceAll(line, "/home/you", g.home)
	parts := strings.Split(line, "…")
	for i, part := range parts {
		parts[i] = g.mask(part)
	}
	return linePattern(parts)
}

// masks replace what differs from run to run, in order.
var masks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\bon [^\s/]+/local\b`), "on <host>/local"}, // job inspect's attempts: this machine's local worker
	{regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z| UTC)?`), "<time>"},
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}(-[0-9a-f]{4}(-[0-9a-f]{4}(-[0-9a-f]{12})?)?)?-?`), "<id>"},
	{regexp.MustCompile(`\b[0-9a-f]{12,}\b|\b[0-9a-f]{12,}$`), "<hex>"},
	{regexp.MustCompile(`dtk_[A-Za-z0-9_-]+`), "<key>"},
	{regexp.MustCompile(`(pgid|"pgid"|"start_ticks")([=:])\d+|process group \d+`), "$1$2<n>"},
	{regexp.MustCompile(`pid[= ]\d+|"pid":\d+`), "pid <n>"},
	{regexp.MustCompile(`\b\d+\.\.\d+\b`), "<n>..<n>"},
	{regexp.MustCompile(`^\s*\d+( +(<time>|daemon))`), "<n>$1"},
	{regexp.MustCompile(`\b(seq|head|checkpoint|head seq|max_workers|count|lag)([= ])\d+`), "$1$2<n>"},
	{regexp.MustCompile(`\d+(\.\.| of |/)(\d+)( events)`), "<n>$1<n>$3"},
	{regexp.MustCompile(`\b\d+( events\b| ms\b)`), "<n>$1"},
	{regexp.MustCompile(`(duration_ms|"duration_ms"|ms)([=:])\d+`), "$1$2<n>"},
	{regexp.MustCompile(`\b(healthy|no_health_command)(\s+)\d+\b`), "$1$2<n>"}, // plugin health's MS
	{regexp.MustCompile(`the logs of \d+ jobs`), "the logs of <n> jobs"},
	{regexp.MustCompile(`\d+(\.\d+)? ?(B|kB|KiB|MB|MiB)\b`), "<size>"},
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:<port>"},
	{regexp.MustCompile(`\s+`), " "},
}

func (g *tour) mask(s string) string {
	s = strings.ReplaceAll(s, g.home, "/home/you")
	for _, m := range masks {
		s = m.re.ReplaceAllString(s, m.with)
	}
	return strings.TrimSpace(s)
}

// tokens are what a later command may name: ids, keys, and the seq an event
// line starts with.
var tokens = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9a-f]{12}\b|dtk_[A-Za-z0-9_-]+`)

var eventSeq = regexp.MustCompile(`^\s*(\d+)\s+\d{4}-\d\d-\d\dT`)

// learn pairs the ids, keys and seqs of a line of the guide with those of
// the line this run printed in its place.
func (g *tour) learn(want, got string) {
	if m, n := eventSeq.FindStringSubmatch(want), eventSeq.FindStringSubmatch(got); m != nil && n != nil {
		g.seqs[m[1]] = n[1]
	}
	if strings.Contains(want, "…") {
		return
	}
	w, o := tokens.FindAllString(want, -1), tokens.FindAllString(got, -1)
	if len(w) != len(o) {
		return
	}
	for i := range w {
		g.learned[w[i]] = o[i]
		if len(w[i]) == 36 && len(o[i]) == 36 {
			g.learned[w[i][24:]] = o[i][24:] // its short id
		}
	}
}

var seqArgument = regexp.MustCompile(`(--until |--from |--at |seq = |seq > )(\d+)\b`)

// substitute names, in a command of the guide, this run's ids, keys, port
// and seqs in place of the guide's.
func (g *tour) substitute(command string) string {
	keys := make([]string, 0, len(g.learned))
	for k := range g.learned {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return len(b) - len(a) })
	for _, k := range keys {
		command = strings.ReplaceAll(command, k, g.learned[k])
	}
	return seqArgument.ReplaceAllStringFunc(command, func(s string) string {
		m := seqArgument.FindStringSubmatch(s)
		if seq, ok := g.seqs[m[2]]; ok {
			return m[1] + seq
		}
		return s
	})
}
