package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/ductile/ductile/internal/ptytest"
	"github.com/stretchr/testify/require"
)

// TestVersion: --version reports what the Go toolchain recorded in the
// binary (go version -m reads the same build info), wherever the flag is.
func TestVersion(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "version", "-m", ductileBin).Output()
	require.NoError(t, err)
	var module string
	settings := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "mod":
			module = f[2]
		case len(f) >= 2 && f[0] == "build":
			k, v, _ := strings.Cut(f[1], "=")
			settings[k] = v
		}
	}
	require.NotEmpty(t, module, "%s", out)

	for _, args := range [][]string{{"--version"}, {"job", "list", "--version"}} {
		r := mustRun(t, nil, args...)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		require.Len(t, lines, 3, r.stdout)
		require.Equal(t, "ductile "+module, lines[0])
		if rev := settings["vcs.revision"]; rev != "" {
			require.True(t, strings.HasPrefix(lines[1], "revision "+rev+" ("+settings["vcs.time"]+")"), lines[1])
			require.Equal(t, settings["vcs.modified"] == "true", strings.HasSuffix(lines[1], ", with uncommitted changes"), lines[1])
		} else {
			require.Equal(t, "revision unknown (built outside a git checkout, or with -buildvcs=false)", lines[1])
		}
		require.Equal(t, strings.Fields(string(out))[1]+" "+settings["GOOS"]+"/"+settings["GOARCH"], lines[2])
		require.Empty(t, r.stderr)
	}
}

// TestHelpCommand: `ductile help NOUN [ACTION]` prints what --help prints;
// an unknown word is a usage error with a suggestion.
func TestHelpCommand(t *testing.T) {
	t.Parallel()
	for _, path := range [][]string{{}, {"job"}, {"job", "list"}, {"plugin", "run"}, {"ledger"}} {
		want := mustRun(t, nil, append(path, "--help")...)
		got := mustRun(t, nil, append([]string{"help"}, path...)...)
		require.Equal(t, want.stdout, got.stdout, "help %v", path)
		require.NotEmpty(t, got.stdout)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "jbo"}, `ductile: unknown command "jbo": did you mean job? (see: ductile --help)` + "\n"},
		{[]string{"help", "job", "lst"}, `ductile: unknown command "lst" for "job": did you mean list? (see: ductile job --help)` + "\n"},
		{[]string{"help", "job", "list", "extra"}, `ductile: unknown command "extra" for "job list" (see: ductile job list --help)` + "\n"},
		{[]string{"jbo", "list"}, `ductile: unknown command "jbo": did you mean job? (see: ductile --help)` + "\n"},
		{[]string{"job", "lst"}, `ductile: unknown command "lst" for "job": did you mean list? (see: ductile job --help)` + "\n"},
	} {
		r := ductile(t, nil, tc.args...)
		require.Equal(t, 2, r.code, "%v: %s", tc.args, r)
		require.Equal(t, tc.want, r.stderr)
		require.Empty(t, r.stdout)
	}
}

// TestTimeoutNeedsWait: plugin run --timeout bounds a --wait; without one
// it is a usage error, before anything is touched.
func TestTimeoutNeedsWait(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state")
	r := ductile(t, nil, "plugin", "run", "echo", "--timeout", "5s", "--state-dir", state)
	require.Equal(t, 2, r.code, "%s", r)
	require.Equal(t, "ductile: --timeout needs --wait or --wait-tree: it bounds how long to wait for the job (see: ductile plugin run --help)\n", r.stderr)
	require.NoDirExists(t, state)
}

// TestJSONErrors: with --json, an error is one JSON object on stderr with
// a stable code; exit statuses are the same as without.
func TestJSONErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustRun(t, nil, "system", "migrate", "--state-dir", dir)
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	badCfg := filepath.Join(t.TempDir(), "ductile.yaml")
	copyFile(t, filepath.Join("testdata", "config", "unknown-key.yaml"), badCfg)
	for _, tc := range []struct {
		name    string
		args    []string
		status  int
		code    string
		message string // a prefix of it
		hint    string
	}{
		{"usage: unknown flag", []string{"job", "list", "--bogus", "--json"}, 2, "invalid_input", "unknown flag --bogus", "see: ductile job list --help"},
		{"usage: --json before the noun", []string{"--json", "job", "list", "--statu", "dead"}, 2, "invalid_input", "unknown flag --statu: did you mean --status?", "see: ductile job list --help"},
		{"usage: --json between noun and action", []string{"job", "--json", "list", "--status", "bogus"}, 2, "invalid_input", `--status "bogus" is not a job status`, ""},
		{"usage: --json after the error", []string{"job", "inspect", "--json"}, 2, "invalid_input", "job inspect needs a JOB_ID (see: ductile job list)", ""},
		{"usage: bad value", []string{"--log-format", "xml", "job", "list", "--json"}, 2, "invalid_input", `--log-format must be auto, json or text, got "xml"`, ""},
		{"not found: job", []string{"job", "inspect", "0000", "--json"}, 1, "not_found", "no job 0000", "see: ductile job list"},
		{"not found: config", []string{"plugin", "list", "--json", "--config", missing}, 1, "not_found", "load config: open " + missing + ": no such file or directory", "check the path given to --config (or $DUCTILE_CONFIG); without either, the built-in defaults apply"},
		{"invalid config", []string{"plugin", "list", "--json", "--config", badCfg}, 1, "invalid_config", "ductile.yaml:2: servce: unknown key: did you mean service?", "check the file with: ductile config check --config " + badCfg},
		{"conflict", []string{"ledger", "replay", "--json", "--out", filepath.Join(dir, "ductile.db")}, 1, "conflict", filepath.Join(dir, "ductile.db") + " already exists", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{}, tc.args...), "--state-dir", dir)
			r := ductile(t, nil, args...)
			require.Equal(t, tc.status, r.code, "%s", r)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %s", r.stderr)
			var out struct {
				Error struct {
					Code, Message, Hint string
				}
			}
			require.NoError(t, json.Unmarshal([]byte(r.stderr), &out), "%s", r)
			require.Equal(t, tc.code, out.Error.Code)
			require.True(t, strings.HasPrefix(out.Error.Message, tc.message), "message %q", out.Error.Message)
			require.Equal(t, tc.hint, out.Error.Hint)

			// Without --json, the same status and a plain message.
			var plain []string
			for _, a := range args {
				if a != "--json" {
					plain = append(plain, a)
				}
			}
			p := ductile(t, nil, plain...)
			require.Equal(t, tc.status, p.code, "%s", p)
			require.True(t, strings.HasPrefix(p.stderr, "ductile: "+tc.message), "%s", p.stderr)
		})
	}
}

// TestLogsOnATerminalAreReadable runs the daemon with stdout on a real
// pseudo-terminal: its log lines are readable text, and JSON again with
// --log-format json; on a pipe they are JSON, and text with --log-format
// text.
func TestLogsOnATerminalAreReadable(t *testing.T) {
	t.Parallel()
	text := regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} INFO  ductile started component=daemon state_dir=\S+ pid=\d+ `)
	isJSON := func(line string) bool {
		var l logLine
		return json.Unmarshal([]byte(line), &l) == nil && l.Message == "ductile started" && l.Level == "INFO"
	}
	for _, tc := range []struct {
		name     string
		terminal bool
		format   string
		want     func(string) bool
	}{
		{"terminal", true, "", text.MatchString},
		{"terminal, --log-format json", true, "json", isJSON},
		{"pipe", false, "", isJSON},
		{"pipe, --log-format text", false, "text", text.MatchString},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := []string{"system", "start", "--state-dir", t.TempDir()}
			if tc.format != "" {
				args = append(args, "--log-format", tc.format)
			}
			if !tc.terminal {
				p := start(t, nil, args...)
				line, _ := p.waitLine(t, 0, func(l string) bool { return strings.Contains(l, "ductile started") })
				require.True(t, tc.want(line), "%q", line)
				require.Equal(t, 0, p.signal(t, syscall.SIGTERM))
				return
			}
			line := firstLineOnTerminal(t, args, "ductile started")
			require.True(t, tc.want(line), "%q", line)
		})
	}
}

// firstLineOnTerminal runs ductile with stdout on a pseudo-terminal until
// it writes a line containing marker, stops it with SIGTERM, and returns
// that line.
func firstLineOnTerminal(t *testing.T, args []string, marker string) string {
	t.Helper()
	controller, terminal := ptytest.Open(t)

	ctx, cancel := context.WithTimeout(t.Context(), procTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, ductileBin, args...)
	cmd.Env = cleanEnv(t)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = terminal, &stderr
	require.NoError(t, cmd.Start())
	terminal.Close() // the child has its own; reads end (EIO) once it exits

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(controller)
		for sc.Scan() {
			lines <- strings.TrimSuffix(sc.Text(), "\r") // the terminal writes \r\n
		}
	}()
	var found string
	for line := range lines {
		if found == "" && strings.Contains(line, marker) {
			found = line
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		}
	}
	require.NoError(t, cmd.Wait(), "stderr: %s", stderr.String())
	require.NotEmpty(t, found, "no line with %q; stderr: %s", marker, stderr.String())
	return found
}

// With no daemon, plugin run --wait --timeout runs the job itself, so at the
// timeout it cancels it (nothing else would run it on), records why, and
// says so: exit 1, code timeout. Opening the ledger and enqueueing are not
// cut short by the timeout.
func TestTimeoutWithoutADaemonCancelsTheJob(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  slow: {config: {dir: "$SCRATCH"}}
`)
	// slow waits for $SCRATCH/release, which never comes: only the timeout
	// ends the job.
	r := w.run("plugin", "run", "slow", "--wait", "--timeout", "1s", "--json")
	require.Equal(t, 1, r.code, "%s", r)
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stderr), &body), r.stderr)
	require.Equal(t, "timeout", body.Error.Code)
	id := regexp.MustCompile(`^job (\S+) was canceled: --timeout 1s reached, and with no daemon running`).FindStringSubmatch(body.Error.Message)
	require.NotNil(t, id, body.Error.Message)

	in := w.inspect(id[1])
	require.Equal(t, "canceled", in.Job.Status)
	var canceled struct {
		Reason string `json:"reason"`
	}
	in.event(t, "job.canceled", &canceled)
	require.Equal(t, "--timeout 1s reached", canceled.Reason)
}
