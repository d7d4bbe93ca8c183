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
// commands, and a real fish completes with it (when fish is installed);
// zsh's parses (zsh -n) and offers job and --json (when zsh is
// installed); other shells exit 2.
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

	if fishBin, err := exec.LookPath("fish"); err != nil {
		t.Log("fish is not installed: the fish script is checked as text only")
	} else {
		// fish asks its own completions what `ductile jo` and `ductile job
		// list --j` complete to, through the script.
		fishScript := filepath.Join(t.TempDir(), "ductile.fish")
		require.NoError(t, os.WriteFile(fishScript, []byte(fish), 0o600))
		cmd := exec.Command(fishBin, "--no-config", "-c",
			`source $argv[1]; complete -C "ductile jo"; complete -C "ductile job list --j"`, fishScript)
		cmd.Env = append(cleanEnv(t), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		cmd.Dir = t.TempDir() // no file names among the candidates
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		var first []string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			first = append(first, strings.Split(line, "\t")[0])
		}
		require.Equal(t, []string{"job", "--json"}, first, "fish completes:\n%s", out)
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

		// The script's function, with the binary on PATH, given the words
		// zsh's completion system would give it; _describe (which shows
		// the candidates and filters them by the typed prefix) prints them.
		zshScript := filepath.Join(t.TempDir(), "ductile.zsh")
		require.NoError(t, os.WriteFile(zshScript, []byte(zsh), 0o600))
		probe := `
compdef() { :; }
_describe() { print -l -- "${(@P)2}"; }
_files() { print "(files)"; }
source $1
words=(ductile jo); _ductile_complete; print -r -- ---
words=(ductile job list --j); _ductile_complete`
		cmd := exec.Command(zshBin, "-f", "-c", probe, "probe", zshScript)
		cmd.Env = append(cleanEnv(t), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err = cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		commands, flags, _ := strings.Cut(string(out), "---\n")
		require.Contains(t, strings.Fields(commands), "job", "zsh is offered:\n%s", out)
		require.Equal(t, []string{"--json"}, strings.Fields(flags), "zsh is offered:\n%s", out)
	}

	r := ductile(t, nil, "completion", "ksh")
	require.Equal(t, 2, r.code, "%s", r)
	require.Contains(t, r.stderr, "bash, zsh or fish")
}
