package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/errcode"
)

func TestVersionText(t *testing.T) {
	t.Parallel()
	info := func(settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/ductile/ductile", Version: "v0.0.0-20261121100000-4f931b1c2d3e+dirty"}}
		settings = append(settings, "GOOS", "linux", "GOARCH", "amd64")
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	require.Equal(t, "ductile v0.0.0-20261121100000-4f931b1c2d3e+dirty\n"+
		"revision 4f931b1c2d3e5f60718293a4b5c6d7e8f9a0b1c2 (2026-11-21T10:00:00Z), with uncommitted changes\n"+
		"go1.26.8 linux/amd64\n",
		versionText(info("vcs", "git", "vcs.revision", "4f931b1c2d3e5f60718293a4b5c6d7e8f9a0b1c2", "vcs.time", "2026-11-21T10:00:00Z", "vcs.modified", "true"), true))
	require.Equal(t, "ductile v0.0.0-20261121100000-4f931b1c2d3e+dirty\n"+
		"revision 4f931b1c2d3e5f60718293a4b5c6d7e8f9a0b1c2 (2026-11-21T10:00:00Z)\n"+
		"go1.26.8 linux/amd64\n",
		versionText(info("vcs.revision", "4f931b1c2d3e5f60718293a4b5c6d7e8f9a0b1c2", "vcs.time", "2026-11-21T10:00:00Z", "vcs.modified", "false"), true))
	require.Equal(t, "ductile v0.0.0-20261121100000-4f931b1c2d3e+dirty\n"+
		"revision unknown (built outside a git checkout, or with -buildvcs=false)\n"+
		"go1.26.8 linux/amd64\n", versionText(info(), true))
	require.Equal(t, "ductile (unknown version: built without module support)\n", versionText(nil, false))
}

func TestWantsJSON(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		"ductile job list --json":                  true,
		"ductile job list --json=true":             true,
		"ductile job list --json=false":            false,
		"ductile job list -json":                   true,
		"ductile job list":                         false,
		"ductile --state-dir --json job list":      false, // the global's value
		"ductile widget run --payload --json echo": false, // the leaf flag's value
		"ductile widget run -- --json":             false, // after --: an argument
		"ductile bogus --json":                     true,  // an unknown command: still asked for
	} {
		app := argsApp()
		require.Equal(t, want, wantsJSON(app, normalizeArgs(app, fields(in))), "%s", in)
	}
}

// TestExitCode: every error gets a code and an exit status in one place,
// and prints as one JSON line with --json.
func TestExitCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err        error
		status     int
		code, text string // text: what stderr shows without --json
		message    string
		hint       string
	}{
		{err: usagef("bad"), status: 2, code: "invalid_input", text: "ductile: bad\n", message: "bad"},
		{err: withHint(errcode.InvalidInput, errors.New("flag provided but not defined: -x"), "see: ductile --help"), status: 2, code: "invalid_input",
			text: "ductile: flag provided but not defined: -x (see: ductile --help)\n", message: "flag provided but not defined: -x", hint: "see: ductile --help"},
		{err: withHint(errcode.InvalidConfig, errors.New("a.yaml:1: x: unknown key"), "check the file"), status: 1, code: "invalid_config",
			text: "ductile: a.yaml:1: x: unknown key (check the file)\n", message: "a.yaml:1: x: unknown key", hint: "check the file"},
		{err: withHint(errcode.InvalidConfig, errors.New("a.yaml:1: x: unknown key\na.yaml:2: y: unknown key"), "check the file"), status: 1, code: "invalid_config",
			text: "ductile: a.yaml:1: x: unknown key\na.yaml:2: y: unknown key\n(check the file)\n", message: "a.yaml:1: x: unknown key\na.yaml:2: y: unknown key", hint: "check the file"},
		{err: hintf(errcode.NotFound, "see: ductile job list", "no job %s", "x"), status: 1, code: "not_found",
			text: "ductile: no job x (see: ductile job list)\n", message: "no job x", hint: "see: ductile job list"},
		{err: notFoundf("no job x"), status: 1, code: "not_found", text: "ductile: no job x\n", message: "no job x"},
		{err: conflictf("taken"), status: 1, code: "conflict", text: "ductile: taken\n", message: "taken"},
		{err: failf("broke"), status: 1, code: "error", text: "ductile: broke\n", message: "broke"},
		{err: fmt.Errorf("wrapped: %w", commands.ErrJobNotFound), status: 1, code: "not_found", text: "ductile: wrapped: job not found\n", message: "wrapped: job not found"},
		{err: &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}, status: 1, code: "not_found", text: "ductile: open /x: file does not exist\n", message: "open /x: file does not exist"},
		{err: fmt.Errorf("start: %w", daemon.ErrLocked), status: 1, code: "conflict", text: "ductile: start: " + daemon.ErrLocked.Error() + "\n", message: "start: " + daemon.ErrLocked.Error()},
		{err: &config.ValidationError{Errors: []config.FieldError{{File: "c.yaml", Line: 1, Msg: "bad"}}}, status: 1, code: "invalid_config", text: "ductile: c.yaml:1: bad\n", message: "c.yaml:1: bad"},
		{err: fmt.Errorf("wait: %w", context.DeadlineExceeded), status: 1, code: "timeout", text: "ductile: wait: context deadline exceeded\n", message: "wait: context deadline exceeded"},
		{err: errors.New("disk on fire"), status: 1, code: "error", text: "ductile: disk on fire\n", message: "disk on fire"},
		{err: context.Canceled, status: 1, code: "canceled", text: "", message: "interrupted"},
		{err: silent(exitFailure), status: 1, text: ""},
		{err: silent(exitUsage), status: 2, text: ""},
	} {
		var text, js bytes.Buffer
		require.Equal(t, tc.status, exitCode(tc.err, &text, false), "%v", tc.err)
		require.Equal(t, tc.text, text.String(), "%v", tc.err)
		require.Equal(t, tc.status, exitCode(tc.err, &js, true), "%v", tc.err)
		if tc.message == "" {
			require.Empty(t, js.String())
			continue
		}
		want := fmt.Sprintf(`{"error":{"code":%q,"message":%q}}`+"\n", tc.code, tc.message)
		if tc.hint != "" {
			want = fmt.Sprintf(`{"error":{"code":%q,"message":%q,"hint":%q}}`+"\n", tc.code, tc.message, tc.hint)
		}
		require.Equal(t, want, js.String())
	}
}

// TestLogFormat: a one-shot command's logger, by --log-format and by
// whether its writer is a terminal.
func TestLogFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		format string
		json   bool
	}{{logAuto, true}, {logJSON, true}, {logText, false}} {
		var b bytes.Buffer
		e := &env{logFormat: tc.format}
		e.logger(&b, 0).Info("hello", "k", "v")
		require.Equal(t, tc.json, bytes.HasPrefix(b.Bytes(), []byte(`{"timestamp":`)), "%s: %s", tc.format, b.String())
	}
}
