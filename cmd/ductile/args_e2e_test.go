package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/ledger"
)

// TestStateDirResolution proves, through the binary, where global flags may
// go and which source of the state directory wins: --state-dir, then
// $DUCTILE_STATE_DIR, then the config's state_dir. Each candidate directory
// holds one event on a stream named after it, so `ledger tail` shows which
// one a command used.
func TestStateDirResolution(t *testing.T) {
	t.Parallel()
	flagDir, envDir := t.TempDir(), t.TempDir()
	cfgDir := t.TempDir()
	cfgFile := filepath.Join(cfgDir, "ductile.yaml")
	copyFile(t, filepath.Join("testdata", "config", "relative-state-dir.yaml"), cfgFile)
	cfgStateDir := filepath.Join(cfgDir, "state") // relative to the config file
	for name, dir := range map[string]string{"flag": flagDir, "env": envDir, "config": cfgStateDir} {
		l := openLedger(t, dir)
		_, err := l.Append(t.Context(), ledger.NewEvent{Stream: "dir/" + name, ExpectedVersion: 0, Type: "dir.marked"})
		require.NoError(t, err)
	}

	// Run from an unrelated directory: a relative path in the config must
	// not depend on the working directory.
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string // stream shown by tail
	}{
		{"flag after the leaf's flags", nil, []string{"ledger", "tail", "--json", "--state-dir", flagDir}, "flag"},
		{"flag before the noun", nil, []string{"--state-dir", flagDir, "ledger", "tail", "--json"}, "flag"},
		{"flag between noun and verb", nil, []string{"ledger", "--state-dir", flagDir, "tail", "--json"}, "flag"},
		{"flag=value", nil, []string{"ledger", "tail", "--state-dir=" + flagDir, "--json"}, "flag"},
		{"flag between leaf flags", nil, []string{"ledger", "tail", "-n", "5", "--state-dir", flagDir, "--json"}, "flag"},
		{"leaf flag before the noun", nil, []string{"--json", "--state-dir", flagDir, "ledger", "tail"}, "flag"},
		{"leaf flag between noun and action", nil, []string{"ledger", "--json", "-n", "5", "tail", "--state-dir", flagDir}, "flag"},
		{"bool global does not swallow the noun", nil, []string{"-v", "--state-dir", flagDir, "ledger", "tail", "--json"}, "flag"},
		{"env", []string{"DUCTILE_STATE_DIR=" + envDir}, []string{"ledger", "tail", "--json"}, "env"},
		{"flag beats env", []string{"DUCTILE_STATE_DIR=" + envDir}, []string{"ledger", "tail", "--json", "--state-dir", flagDir}, "flag"},
		{"config", nil, []string{"ledger", "tail", "--json", "--config", cfgFile}, "config"},
		{"config short flag first", nil, []string{"-c", cfgFile, "ledger", "tail", "--json"}, "config"},
		{"config from env", []string{"DUCTILE_CONFIG=" + cfgFile}, []string{"ledger", "tail", "--json"}, "config"},
		{"flag beats config", nil, []string{"ledger", "tail", "--json", "--config", cfgFile, "--state-dir", flagDir}, "flag"},
		{"env beats config", []string{"DUCTILE_STATE_DIR=" + envDir}, []string{"ledger", "tail", "--json", "--config", cfgFile}, "env"},
		{"env beats env config", []string{"DUCTILE_STATE_DIR=" + envDir, "DUCTILE_CONFIG=" + cfgFile}, []string{"ledger", "tail", "--json"}, "env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := mustRun(t, cleanEnv(t, tc.env...), tc.args...)
			lines := parseTail(t, r.stdout)
			require.Len(t, lines, 1, r.stdout)
			require.Equal(t, "dir/"+tc.want, lines[0].Stream)
		})
	}

	// With none of them, the per-user default under $XDG_STATE_HOME.
	t.Run("default", func(t *testing.T) {
		t.Parallel()
		xdg := t.TempDir()
		env := append(cleanEnv(t), "XDG_STATE_HOME="+xdg)
		mustRun(t, env, "system", "migrate") // a read-only command would not create it
		r := mustRun(t, env, "ledger", "stats", "--json")
		require.Contains(t, r.stdout, `"database": "`+filepath.Join(xdg, "ductile", "ductile.db")+`"`)
	})

	// A relative --state-dir is taken from the working directory and made absolute.
	t.Run("relative flag", func(t *testing.T) {
		t.Parallel()
		r := mustRun(t, nil, "ledger", "stats", "--json", "--state-dir", relTo(t, flagDir))
		require.Contains(t, r.stdout, `"database": "`+filepath.Join(flagDir, "ductile.db")+`"`)
	})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o600))
}

// relTo is dir relative to the test's working directory.
func relTo(t *testing.T, dir string) string {
	t.Helper()
	wd, err := os.Getwd()
	require.NoError(t, err)
	rel, err := filepath.Rel(wd, dir)
	require.NoError(t, err)
	require.False(t, filepath.IsAbs(rel))
	return rel
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	badCfg := filepath.Join(t.TempDir(), "ductile.yaml")
	copyFile(t, filepath.Join("testdata", "config", "unknown-key.yaml"), badCfg)

	cases := []struct {
		name   string
		env    []string
		args   []string
		code   int
		stderr []string // substrings of stderr
	}{
		{"unknown leaf flag", nil, []string{"ledger", "tail", "--bogus", "--state-dir", dir}, 2,
			[]string{"ductile: unknown flag --bogus (see: ductile ledger tail --help)\n"}},
		{"unknown flag before the noun", nil, []string{"--bogus", "ledger", "tail", "--state-dir", dir}, 2,
			[]string{"ductile: unknown flag --bogus (see: ductile ledger tail --help)\n"}},
		{"unknown flag alone", nil, []string{"--bogus", "--state-dir", dir}, 2,
			[]string{"ductile: unknown flag --bogus (see: ductile --help)\n"}},
		{"unknown short flag", nil, []string{"ledger", "tail", "-x", "--state-dir", dir}, 2,
			[]string{"ductile: unknown flag -x (see: ductile ledger tail --help)\n"}},
		// Did you mean: the action's flags and the globals, wherever the typo is.
		{"misspelt flag of a mutation", nil, []string{"job", "cancel", "abcd", "--dryrun", "--state-dir", dir}, 2,
			[]string{"ductile: unknown flag --dryrun: did you mean --dry-run? (see: ductile job cancel --help)\n"}},
		{"misspelt flag before the noun", nil, []string{"--jsn", "queue", "--state-dir", dir}, 2,
			[]string{"ductile: unknown flag --jsn: did you mean --json? (see: ductile queue --help)\n"}},
		{"misspelt flag between noun and action", nil, []string{"job", "--limt", "3", "list", "--state-dir", dir}, 2,
			[]string{"ductile: unknown flag --limt: did you mean --limit? (see: ductile job list --help)\n"}},
		{"misspelt global after the action", nil, []string{"ledger", "tail", "--state-dri", dir}, 2,
			[]string{"ductile: unknown flag --state-dri: did you mean --state-dir? (see: ductile ledger tail --help)\n"}},
		{"misspelt flag after a positional", nil, []string{"plugin", "run", "echo", "--paylod", "{}", "--state-dir", dir}, 2,
			[]string{"ductile: unknown flag --paylod: did you mean --payload? (see: ductile plugin run --help)\n"}},
		{"bad flag value", nil, []string{"ledger", "tail", "--from", "abc", "--state-dir", dir}, 2,
			[]string{`invalid value "abc" for flag -from`}},
		{"negative --until", nil, []string{"ledger", "replay", "--until", "-3", "--out", filepath.Join(t.TempDir(), "x.db"), "--state-dir", dir}, 2,
			[]string{"ductile: --until must be a positive seq\n"}},
		{"unknown command", nil, []string{"bogus", "--state-dir", dir}, 2, []string{`ductile: unknown command "bogus" (see: ductile --help)`}},
		{"unknown subcommand", nil, []string{"ledger", "bogus", "--state-dir", dir}, 2, []string{`ductile: unknown command "bogus" for "ledger" (see: ductile ledger --help)`}},
		{"unknown word before a command", nil, []string{"bogus", "ledger", "stats", "--state-dir", dir}, 2, []string{`unknown command "bogus"`}},
		{"extra positionals", nil, []string{"ledger", "tail", "extra", "--state-dir", dir}, 2, []string{`ledger tail takes no arguments, got ["extra"]`}},
		// A fresh state dir (not even created yet): the cleanup below proves
		// the missing argument was caught before the ledger was opened.
		{"job cancel without a JOB_ID", nil, []string{"job", "cancel", "--state-dir", filepath.Join(dir, "fresh")}, 2,
			[]string{"ductile: job cancel needs a JOB_ID (see: ductile job list)\n"}},
		{"job inspect with two JOB_IDs", nil, []string{"job", "inspect", "a", "b", "--state-dir", dir}, 2,
			[]string{`ductile: job inspect takes one JOB_ID, got ["a" "b"] (see: ductile job list)` + "\n"}},
		{"job logs without a JOB_ID", nil, []string{"job", "logs", "--state-dir", dir}, 2,
			[]string{"ductile: job logs needs a JOB_ID (see: ductile job list)\n"}},
		{"bench with no jobs", nil, []string{"bench", "--jobs", "0"}, 2, []string{"ductile: --jobs must be at least 1\n"}},
		{"bench with no rounds", nil, []string{"bench", "--rounds", "-1"}, 2, []string{"ductile: --rounds must be at least 1\n"}},
		{"plugin run with two PLUGINs", nil, []string{"plugin", "run", "a", "b", "--state-dir", dir}, 2,
			[]string{`ductile: plugin run takes one PLUGIN, got ["a" "b"] (see: ductile plugin list)`}},
		{"missing --config", nil, []string{"plugin", "list", "--config", missing, "--state-dir", dir}, 1,
			[]string{"ductile: load config: open " + missing + ": no such file or directory (check the path given to --config (or $DUCTILE_CONFIG); without either, the built-in defaults apply)\n"}},
		{"missing $DUCTILE_CONFIG", []string{"DUCTILE_CONFIG=" + missing}, []string{"system", "start", "--state-dir", dir}, 1,
			[]string{"ductile: load config: open " + missing + ": no such file or directory (check the path given to --config (or $DUCTILE_CONFIG); without either, the built-in defaults apply)\n"}},
		{"invalid config", nil, []string{"plugin", "list", "--config", badCfg, "--state-dir", dir}, 1,
			[]string{"ductile.yaml:2: servce: unknown key: did you mean service?"}},
	}

	// None of them touched the state dir (checked once every case has run).
	t.Cleanup(func() {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		require.Empty(t, names, "bad input left files in the state dir: %s", strings.Join(names, " "))
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := ductile(t, cleanEnv(t, tc.env...), tc.args...)
			require.Equal(t, tc.code, r.code, "%s", r)
			for _, s := range tc.stderr {
				require.Contains(t, r.stderr, s)
			}
			require.NotContains(t, r.stdout, "ductile started")
		})
	}
}
