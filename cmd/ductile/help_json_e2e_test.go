package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// cliHelp is `ductile help --json` as a client reads it (docs/cli.md).
type cliHelp struct {
	Version     int          `json:"version"`
	GlobalFlags []cliFlag    `json:"global_flags"`
	ExitCodes   []cliExit    `json:"exit_codes"`
	Commands    []cliCommand `json:"commands"`
}

type cliCommand struct {
	Path        string       `json:"path"`
	Name        string       `json:"name"`
	Aliases     []string     `json:"aliases"`
	Usage       string       `json:"usage"`
	ArgsUsage   string       `json:"args_usage"`
	Flags       []cliFlag    `json:"flags"`
	ExitCodes   []cliExit    `json:"exit_codes"`
	Subcommands []cliCommand `json:"subcommands"`
}

type cliFlag struct {
	Name      string   `json:"name"`
	Aliases   []string `json:"aliases"`
	Type      string   `json:"type"`
	ValueName string   `json:"value_name"`
	Default   string   `json:"default"`
	Usage     string   `json:"usage"`
	Required  bool     `json:"required"`
	EnvVars   []string `json:"env_vars"`
}

type cliExit struct {
	Status  int    `json:"status"`
	Meaning string `json:"meaning"`
}

// binaryHelp runs the real binary's `help --json` and parses it.
func binaryHelp(t *testing.T) cliHelp {
	t.Helper()
	r := mustRun(t, nil, "help", "--json")
	var doc cliHelp
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), "help --json prints one JSON document:\n%s", r.stdout)
	require.Equal(t, 1, doc.Version)
	return doc
}

// walkCommands calls fn for every command of cmds, depth first.
func walkCommands(cmds []cliCommand, fn func(cliCommand)) {
	for _, c := range cmds {
		fn(c)
		walkCommands(c.Subcommands, fn)
	}
}

// TestHelpJSONFlagsAreTheOnesHelpShows walks the binary's help --json and
// checks, for every command listed, that `ductile PATH --help` shows each
// of its flags, with the type, default and env vars help --json gives.
func TestHelpJSONFlagsAreTheOnesHelpShows(t *testing.T) {
	t.Parallel()
	doc := binaryHelp(t)
	commands := 0
	walkCommands(doc.Commands, func(c cliCommand) {
		commands++
		require.NotEmpty(t, c.Usage, "%s has a usage line", c.Path)
		require.NotNil(t, c.Aliases)
		require.NotNil(t, c.Subcommands)
		require.NotNil(t, c.ExitCodes)
		help := mustRun(t, nil, append(strings.Fields(c.Path), "--help")...).stdout
		for _, f := range c.Flags {
			require.Contains(t, help, "--"+f.Name, "ductile %s --help shows --%s", c.Path, f.Name)
			require.NotEmpty(t, f.Type, "%s --%s has a type", c.Path, f.Name)
			if f.Type == "bool" {
				require.Equal(t, "false", f.Default, "%s --%s", c.Path, f.Name)
			}
			for _, env := range f.EnvVars {
				require.Contains(t, help, "$"+env, "ductile %s --help names %s", c.Path, env)
			}
			if f.ValueName != "" {
				require.Contains(t, help, "--"+f.Name+" "+f.ValueName, "ductile %s --help", c.Path)
			}
		}
	})
	require.Greater(t, commands, 40)
	t.Logf("%d commands checked against their --help", commands)

	// Known defaults come through as --help shows them, unquoted.
	flag := func(path, name string) cliFlag {
		var out cliFlag
		walkCommands(doc.Commands, func(c cliCommand) {
			if c.Path != path {
				return
			}
			for _, f := range c.Flags {
				if f.Name == name {
					out = f
				}
			}
		})
		require.NotEmpty(t, out.Name, "%s --%s is in help --json", path, name)
		return out
	}
	require.Equal(t, cliFlag{Name: "payload", Aliases: []string{}, Type: "string", ValueName: "JSON",
		Usage: "JSON payload, handed to the plugin as event.payload; @FILE reads it from FILE, - from stdin", EnvVars: []string{}},
		flag("plugin run", "payload"))
	require.Equal(t, "duration", flag("plugin run", "timeout").Type)
	for _, f := range doc.GlobalFlags {
		if f.Name == "log-format" {
			require.Equal(t, "auto", f.Default)
		}
	}
}

// TestCompletionScripts: the bash script, sourced in a real bash with the
// binary on PATH, completes `ductile jo` to job (the script asks the
// binary, as a shell would when Tab is pressed); fish's names the
// commands; zsh's parses (when zsh is installed); other shells exit 2.
func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	require.NoError(t, err, "bash is needed to test the bash completion")
	bin := t.TempDir()
	require.NoError(t, os.Symlink(ductileBin, filepath.Join(bin, "ductile")))
	script := filepath.Join(t.TempDir(), "ductile.bash")
	require.NoError(t, os.WriteFile(script, []byte(mustRun(t, nil, "completion", "bash").stdout), 0o600))

	// complete_line sets what bash sets when Tab is pressed at the end of
	// the line, calls the function `complete -p ductile` names, and
	// prints the candidates.
	probe := `
source "$1"
spec=$(complete -p ductile) || exit 3
fn=${spec##*-F }; fn=${fn%% *}
complete_line() {
  local line="$1"
  read -ra COMP_WORDS <<< "$line"
  [[ "$line" == *" " ]] && COMP_WORDS+=("")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMP_LINE="$line"; COMP_POINT=${#line}
  COMPREPLY=()
  "$fn" ductile "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
  echo "${COMPREPLY[*]}"
}
complete_line "ductile jo"
complete_line "ductile plugin ru"
complete_line "ductile job list --js"
`
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", probe, "probe", script)
	cmd.Env = append(cleanEnv(t), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, []string{"job", "run", "--json"}, strings.Split(strings.TrimSpace(string(out)), "\n"))

	fish := mustRun(t, nil, "completion", "fish").stdout
	for _, c := range binaryHelp(t).Commands {
		require.Contains(t, fish, "-a '"+c.Name+"'", "the fish script completes %s", c.Name)
	}

	zsh := mustRun(t, nil, "completion", "zsh").stdout
	require.True(t, strings.HasPrefix(zsh, "#compdef ductile\n"))
	if zshBin, err := exec.LookPath("zsh"); err != nil {
		t.Log("zsh is not installed: the zsh script's syntax is not checked (zsh -n)")
	} else {
		check := exec.Command(zshBin, "-n")
		check.Stdin = strings.NewReader(zsh)
		out, err := check.CombinedOutput()
		require.NoError(t, err, "zsh -n: %s", out)
	}

	r := ductile(t, nil, "completion", "ksh")
	require.Equal(t, 2, r.code, "%s", r)
	require.Contains(t, r.stderr, "bash, zsh or fish")
}
