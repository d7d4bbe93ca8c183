package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/plugins/builtin"
)

// builtinCommand is the hidden entrypoint of the plugins built into this
// executable: the bundled root's http/run and notify/run exec
// "ductile builtin NAME", which speaks protocol v2 on stdin and stdout.
func builtinCommand() *cli.Command {
	return &cli.Command{
		Name:      "builtin",
		Usage:     "run a built-in plugin on the protocol v2 request on stdin (the entrypoint of the bundled http and notify plugins)",
		ArgsUsage: "NAME",
		Hidden:    true,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("builtin takes one plugin NAME")
			}
			// A plugin's exit status is part of the protocol (78: wrong
			// protocol), so it is passed on as it is; nothing is deferred.
			if code := builtin.Run(c.Context, c.Args().First(), os.Stdin, os.Stdout, os.Stderr); code != 0 {
				os.Exit(code)
			}
			return nil
		},
	}
}
