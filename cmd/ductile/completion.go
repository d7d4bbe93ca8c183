package main

import (
	_ "embed"
	"fmt"

	"github.com/urfave/cli/v2"
)

// The completion scripts, adapted from urfave/cli v2's autocomplete
// directory (MIT): each asks the binary for its candidates with
// --generate-bash-completion (app.EnableBashCompletion).
var (
	//go:embed completion/ductile.bash
	bashCompletion string
	//go:embed completion/ductile.zsh
	zshCompletion string
)

// completionCommand is `completion bash|zsh|fish`.
func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script for bash, zsh or fish",
		ArgsUsage: "SHELL",
		Description: "Prints the script on stdout. Load it in the current shell with\n" +
			"  source <(ductile completion bash)      (bash; zsh likewise, after compinit)\n" +
			"  ductile completion fish | source       (fish)\n" +
			"or save it where the shell loads completions (see the README, \"Shell completion\").",
		Action: func(c *cli.Context) error {
			switch shell := c.Args().First(); shell {
			case "bash":
				_, err := fmt.Fprint(c.App.Writer, bashCompletion)
				return err
			case "zsh":
				_, err := fmt.Fprint(c.App.Writer, zshCompletion)
				return err
			case "fish":
				script, err := c.App.ToFishCompletion()
				if err != nil {
					return failf("make the fish completion: %v", err)
				}
				_, err = fmt.Fprint(c.App.Writer, script)
				return err
			default:
				return usagef("completion takes bash, zsh or fish, got %q (see: ductile completion --help)", shell)
			}
		},
	}
}
