package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/pluginsource"
)

// pluginSourceCommands are plugin add, update and remove.
func pluginSourceCommands() []*cli.Command {
	root := &cli.StringFlag{Name: "root", Usage: "the plugin root `DIR` to install into (default: the first of the config's plugin_roots)"}
	return []*cli.Command{
		{
			Name:      "add",
			Usage:     "install a plugin from a git repository or a folder, pinned to its commit",
			ArgsUsage: "SOURCE[@REF]",
			Description: "SOURCE is a git URL, a local git repository or a folder; REF a branch, tag or commit\n" +
				"(default: the repository's HEAD). The plugin is fetched (git, shallow where the server\n" +
				"allows it), validated exactly as discovery does (what discovery would skip is refused\n" +
				"with discovery's own message), installed as <root>/<name>, its source, ref and commit\n" +
				"recorded in <root>/<name>/.ductile-source.json, and every file's BLAKE3 hash in\n" +
				"<root>/.checksums: discovery refuses the plugin if any of them changes. A repository of\n" +
				"many plugins, one folder each, is added one plugin at a time with --path (or --name).\n" +
				"A running daemon loads it at its next start or reload (ductile system reload).",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "path", Usage: "the plugin's `FOLDER` inside the source (a repository of many plugins)"},
				&cli.StringFlag{Name: "name", Usage: "the plugin `NAME` to pick from a repository of many plugins (or to check)"},
				root, jsonFlag(), dryRunFlag(),
			},
			Action: pluginAdd,
		},
		{
			Name:      "update",
			Usage:     "move an added plugin to another commit, showing what its manifest changes",
			ArgsUsage: "NAME [@REF]",
			Description: "Fetches the plugin's recorded source again, at REF if given (else its recorded ref:\n" +
				"a branch moves to its newest commit), validates it as add does, and shows how the\n" +
				"version, commands, their types and the config keys change, and which files. Without\n" +
				"--dry-run it replaces the files and pins them in .checksums.",
			Flags:  []cli.Flag{jsonFlag(), dryRunFlag()},
			Action: pluginUpdate,
		},
		{
			Name:        "remove",
			Usage:       "remove a plugin that plugin add installed",
			ArgsUsage:   "NAME",
			Description: "Removes its directory and its lines in .checksums. Its history stays in the ledger.",
			Flags:       []cli.Flag{jsonFlag(), dryRunFlag()},
			Action:      pluginRemove,
		},
	}
}

// sourceEnv is where plugin add, update and remove work: the config's
// roots, the plugins found now, discovery's options.
func sourceEnv(c *cli.Context, e *env) (pluginsource.Env, error) {
	reg, _, err := daemon.DiscoverPlugins(e.stateDir, e.cfg, e.quietLogger())
	if err != nil {
		return pluginsource.Env{}, err
	}
	opts := pluginhost.DiscoverOptions{AllowSymlinks: e.cfg.Service.AllowSymlinks, Config: map[string]map[string]any{}}
	for name, pc := range e.cfg.Plugins {
		opts.Config[name] = pc.Config
	}
	env := pluginsource.Env{Roots: e.cfg.PluginRoots, Options: opts, Loaded: reg.List(), Root: c.String("root")}
	for _, s := range reg.Skipped() {
		env.Loaded = append(env.Loaded, &pluginhost.Plugin{Name: s.Name, Dir: s.Dir})
	}
	if env.Root == "" && len(env.Roots) > 0 {
		env.Root = env.Roots[0]
	}
	return env, nil
}

// declaredOut is what a plugin declares, as add and update print it.
type declaredOut struct {
	Name        string        `json:"name"`
	Version     string        `json:"version"`
	Description string        `json:"description,omitempty"`
	Dir         string        `json:"dir"`
	Commands    []commandOut  `json:"commands"`
	ConfigKeys  configKeysOut `json:"config_keys"`
	Source      sourceOut     `json:"source"`
	Files       int           `json:"files"`
	Checksums   string        `json:"checksums"`
	Notes       []string      `json:"notes"`
}

type commandOut struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
}

type configKeysOut struct {
	Required []string `json:"required"`
	Optional []string `json:"optional"`
}

// sourceOut is a plugin's source record as list, add and update print it.
type sourceOut struct {
	Source      string `json:"source"`
	Kind        string `json:"kind"`
	Ref         string `json:"ref,omitempty"`
	Commit      string `json:"commit,omitempty"`
	Path        string `json:"path,omitempty"`
	InstalledAt string `json:"installed_at"`
}

func sourceOf(r pluginsource.Record) sourceOut {
	return sourceOut{Source: r.Source, Kind: r.Kind, Ref: r.Ref, Commit: r.Commit, Path: r.Path, InstalledAt: r.InstalledAt}
}

func declared(inst *pluginsource.Installed) declaredOut {
	out := declaredOut{Name: inst.Name, Dir: inst.Dir, Source: sourceOf(inst.Record), Files: len(inst.Files),
		Checksums: inst.Root + "/" + pluginhost.RootChecksumsName, Commands: []commandOut{},
		ConfigKeys: configKeysOut{Required: []string{}, Optional: []string{}}, Notes: []string{}}
	if m := inst.Manifest; m != nil {
		out.Version, out.Description = m.Version, m.Description
		for _, c := range m.Commands {
			out.Commands = append(out.Commands, commandOut{Name: c.Name, Type: string(c.Type), Description: c.Description})
		}
		out.ConfigKeys.Required = append(out.ConfigKeys.Required, m.ConfigKeys.Required...)
		out.ConfigKeys.Optional = append(out.ConfigKeys.Optional, m.ConfigKeys.Optional...)
	}
	if inst.MissingConfig != nil {
		out.Notes = append(out.Notes, "until its config is set, discovery skips it: "+inst.MissingConfig.Error())
	}
	for _, d := range inst.Overrides {
		out.Notes = append(out.Notes, fmt.Sprintf("it shadows the plugin of the same name in %s (the first root wins)", d))
	}
	return out
}

// pin is how a source record reads on one line: commit (short), ref, path.
func (s sourceOut) pin() string {
	if s.Kind == pluginsource.KindFolder {
		return "folder (files pinned)"
	}
	p := s.Commit
	if len(p) > 12 {
		p = p[:12]
	}
	if s.Ref != "" {
		p += " (" + s.Ref + ")"
	}
	return p
}

func (s sourceOut) where() string {
	if s.Path != "" {
		return s.Source + " --path " + s.Path
	}
	return s.Source
}

func printDeclared(w io.Writer, d declaredOut) {
	fmt.Fprintf(w, "plugin %s %s", d.Name, d.Version)
	if d.Description != "" {
		fmt.Fprintf(w, ": %s", d.Description)
	}
	fmt.Fprintf(w, "\n  from      %s\n  pinned    %s\n  into      %s (%d files pinned in %s)\n", d.Source.where(), d.Source.pin(), d.Dir, d.Files, d.Checksums)
	fmt.Fprintln(w, "commands:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range d.Commands {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Name, c.Type, c.Description)
	}
	tw.Flush()
	fmt.Fprintf(w, "config keys: required %s; optional %s\n", listOrNone(d.ConfigKeys.Required), listOrNone(d.ConfigKeys.Optional))
	for _, n := range d.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// sourceError maps pluginsource's errors to codes.
func sourceError(err error) error {
	var refused *pluginsource.RefusedError
	switch {
	case errors.As(err, &refused):
		return hintf(errcode.InvalidInput, "fix the plugin at its source (see docs/plugin-development.md#discovery-and-trust-rules), then add it again", "%v", err)
	case errors.Is(err, pluginsource.ErrExists):
		return conflictf("%v", err)
	case errors.Is(err, pluginsource.ErrNotInstalled):
		return notFoundf("%v", err)
	case errors.Is(err, pluginsource.ErrNoPlugin):
		return usagef("%v", err)
	}
	return failf("%v", err)
}

const reloadNote = "a running daemon loads it at its next start or reload (ductile system reload)"

func pluginAdd(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("plugin add takes one SOURCE[@REF] (a git URL, a local git repository or a folder)")
	}
	src, err := pluginsource.ParseSource(c.Args().First())
	if err != nil {
		return usagef("%v", err)
	}
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	env, err := sourceEnv(c, e)
	if err != nil {
		return err
	}
	inst, err := pluginsource.Add(c.Context, env, pluginsource.AddRequest{Source: src, Path: c.String("path"), Name: c.String("name"), DryRun: c.Bool("dry-run")})
	if err != nil {
		return sourceError(err)
	}
	out := struct {
		DryRun bool `json:"dry_run"`
		declaredOut
	}{c.Bool("dry-run"), declared(inst)}
	if !slices.ContainsFunc(e.cfg.PluginRoots, func(r string) bool { return sameDir(r, inst.Root) }) {
		out.Notes = append(out.Notes, fmt.Sprintf("%s is not among the config's plugin_roots: add it there, or discovery never sees the plugin", inst.Root))
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	verb := "added"
	if out.DryRun {
		verb = "would add (dry run: nothing written)"
	}
	fmt.Fprintf(e.stdout, "%s ", verb)
	printDeclared(e.stdout, out.declaredOut)
	if !out.DryRun {
		fmt.Fprintln(e.stdout, reloadNote)
	}
	return nil
}

// sameDir reports whether a and b name the same directory (symlinks
// resolved).
func sameDir(a, b string) bool {
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	return errA == nil && errB == nil && ra == rb
}
