package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

// helpTree runs `ductile help --json` in this process and parses it.
func helpTree(t *testing.T) helpDocument {
	t.Helper()
	var stdout, stderr strings.Builder
	require.Equal(t, exitOK, run(context.Background(), []string{"ductile", "help", "--json"}, &stdout, &stderr), stderr.String())
	var doc helpDocument
	require.NoError(t, json.Unmarshal([]byte(stdout.String()), &doc), "help --json prints one JSON document:\n%s", stdout.String())
	return doc
}

// walkHelp calls fn for every command of cmds, depth first.
func walkHelp(cmds []helpCommand, fn func(helpCommand)) {
	for _, c := range cmds {
		fn(c)
		walkHelp(c.Subcommands, fn)
	}
}

// TestHelpJSONHasEveryCommandOfTheApp: every visible command of the app's
// tree, at any depth, is in the binary's help --json, with its flags, and
// nothing else is (the list is derived from newApp, not written here).
func TestHelpJSONHasEveryCommandOfTheApp(t *testing.T) {
	t.Parallel()
	doc := helpTree(t)
	require.Equal(t, helpJSONVersion, doc.Version)
	require.Equal(t, exitCodes, doc.ExitCodes)

	want := map[string][]string{} // path → flag names
	var walk func([]*cli.Command, string)
	walk = func(cmds []*cli.Command, parent string) {
		for _, c := range cmds {
			if c.Hidden {
				continue
			}
			path := strings.TrimSpace(parent + " " + c.Name)
			names := []string{}
			for _, f := range c.Flags {
				if v, ok := f.(cli.VisibleFlag); !ok || v.IsVisible() {
					names = append(names, f.Names()[0])
				}
			}
			want[path] = names
			walk(c.Subcommands, path)
		}
	}
	app := newApp(io.Discard, io.Discard)
	walk(app.Commands, "")
	require.Greater(t, len(want), 40, "the app has its command tree")

	got := map[string][]string{}
	walkHelp(doc.Commands, func(c helpCommand) {
		names := []string{}
		for _, f := range c.Flags {
			names = append(names, f.Name)
		}
		got[c.Path] = names
	})
	require.Equal(t, want, got)

	for path := range commandExitCodes {
		require.Contains(t, got, path, "commandExitCodes names a command the tree has")
	}
	var globals []string
	for _, f := range doc.GlobalFlags {
		globals = append(globals, f.Name)
	}
	require.Equal(t, []string{"config", "state-dir", "verbose", "log-format", "version"}, globals)
}

// TestHelpJSONOfOneCommand: help NOUN ACTION --json prints that command's
// entry of the tree; an unknown one exits 2 with a JSON error; plain help
// is the help text as before.
func TestHelpJSONOfOneCommand(t *testing.T) {
	t.Parallel()
	doc := helpTree(t)
	var want helpCommand
	walkHelp(doc.Commands, func(c helpCommand) {
		if c.Path == "plugin run" {
			want = c
		}
	})
	runHere := func(args ...string) (int, string, string) {
		var stdout, stderr strings.Builder
		code := run(context.Background(), append([]string{"ductile"}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, stdout, stderr := runHere("help", "plugin", "run", "--json")
	require.Equal(t, exitOK, code, stderr)
	var got helpCommand
	require.NoError(t, json.Unmarshal([]byte(stdout), &got))
	require.Equal(t, want, got)
	require.Equal(t, commandExitCodes["plugin run"], got.ExitCodes)

	code, stdout, stderr = runHere("help", "plugin", "nosuch", "--json")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, `"code":"invalid_input"`)
	require.Empty(t, stdout)

	code, stdout, _ = runHere("help")
	require.Equal(t, exitOK, code)
	require.Contains(t, stdout, "USAGE:")
	require.Contains(t, stdout, "completion")
	require.NotContains(t, stdout, `"commands"`)
	code, stdout, _ = runHere("help", "job")
	require.Equal(t, exitOK, code)
	require.Contains(t, stdout, "ductile job")
}
