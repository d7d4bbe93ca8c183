package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/pluginsource"
)

// diffOut is how plugin update prints a pluginsource.Diff.
type diffOut struct {
	Version         [2]string    `json:"version"`
	Commit          [2]string    `json:"commit"`
	Ref             [2]string    `json:"ref"`
	Entrypoint      [2]string    `json:"entrypoint"`
	CommandsAdded   []commandOut `json:"commands_added"`
	CommandsRemoved []commandOut `json:"commands_removed"`
	CommandsRetyped []retypedOut `json:"commands_retyped"`
	RequiredAdded   []string     `json:"required_config_added"`
	RequiredRemoved []string     `json:"required_config_removed"`
	OptionalAdded   []string     `json:"optional_config_added"`
	OptionalRemoved []string     `json:"optional_config_removed"`
	FilesAdded      []string     `json:"files_added"`
	FilesRemoved    []string     `json:"files_removed"`
	FilesChanged    []string     `json:"files_changed"`
	Unchanged       bool         `json:"unchanged"`
}

type retypedOut struct {
	Name string `json:"name"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

func diffOf(d pluginsource.Diff) diffOut {
	nonNil := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	out := diffOut{
		Version: [2]string{d.OldVersion, d.NewVersion}, Commit: [2]string{d.OldCommit, d.NewCommit},
		Ref: [2]string{d.OldRef, d.NewRef}, Entrypoint: [2]string{d.OldEntrypoint, d.NewEntry},
		CommandsAdded: []commandOut{}, CommandsRemoved: []commandOut{}, CommandsRetyped: []retypedOut{},
		RequiredAdded: nonNil(d.RequiredAdded), RequiredRemoved: nonNil(d.RequiredRemoved),
		OptionalAdded: nonNil(d.OptionalAdded), OptionalRemoved: nonNil(d.OptionalRemoved),
		FilesAdded: nonNil(d.FilesAdded), FilesRemoved: nonNil(d.FilesRemoved), FilesChanged: nonNil(d.FilesChanged),
		Unchanged: d.Empty(),
	}
	for _, c := range d.CommandsAdded {
		out.CommandsAdded = append(out.CommandsAdded, commandOut{Name: c.Name, Type: string(c.Type), Description: c.Description})
	}
	for _, c := range d.CommandsRemoved {
		out.CommandsRemoved = append(out.CommandsRemoved, commandOut{Name: c.Name, Type: string(c.Type), Description: c.Description})
	}
	for _, r := range d.CommandsRetyped {
		out.CommandsRetyped = append(out.CommandsRetyped, retypedOut{Name: r.Name, Old: string(r.Old), New: string(r.New)})
	}
	return out
}

func printDiff(w io.Writer, d diffOut) {
	pair := func(label string, p [2]string) {
		if p[0] != p[1] {
			fmt.Fprintf(w, "  %-11s %s -> %s\n", label, dashIfEmpty(p[0]), dashIfEmpty(p[1]))
		}
	}
	pair("version", d.Version)
	pair("commit", d.Commit)
	pair("ref", d.Ref)
	pair("entrypoint", d.Entrypoint)
	for _, c := range d.CommandsAdded {
		fmt.Fprintf(w, "  + command   %s (%s)\n", c.Name, c.Type)
	}
	for _, c := range d.CommandsRemoved {
		fmt.Fprintf(w, "  - command   %s (%s)\n", c.Name, c.Type)
	}
	for _, r := range d.CommandsRetyped {
		fmt.Fprintf(w, "  ~ command   %s: %s -> %s\n", r.Name, r.Old, r.New)
	}
	keys := func(sign, kind string, ks []string) {
		for _, k := range ks {
			fmt.Fprintf(w, "  %s config    %s (%s)\n", sign, k, kind)
		}
	}
	keys("+", "required", d.RequiredAdded)
	keys("-", "required", d.RequiredRemoved)
	keys("+", "optional", d.OptionalAdded)
	keys("-", "optional", d.OptionalRemoved)
	files := func(sign string, fs []string) {
		if len(fs) > 0 {
			fmt.Fprintf(w, "  %s files     %s\n", sign, strings.Join(fs, ", "))
		}
	}
	files("+", d.FilesAdded)
	files("-", d.FilesRemoved)
	files("~", d.FilesChanged)
	if d.Unchanged {
		fmt.Fprintln(w, "  no change")
	}
}

func pluginUpdate(c *cli.Context) error {
	args := c.Args().Slice()
	if len(args) == 0 || len(args) > 2 {
		return usagef("plugin update takes NAME and, optionally, @REF (a branch, tag or commit)")
	}
	name, ref := args[0], ""
	if n, r, ok := strings.Cut(name, "@"); ok {
		name, ref = n, r
	}
	if len(args) == 2 {
		ref = strings.TrimPrefix(args[1], "@")
	}
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	env, err := sourceEnv(c, e)
	if err != nil {
		return err
	}
	u, err := pluginsource.UpdatePlugin(c.Context, env, name, ref, c.Bool("dry-run"))
	if err != nil {
		return sourceError(err)
	}
	out := struct {
		DryRun  bool        `json:"dry_run"`
		Changes diffOut     `json:"changes"`
		Plugin  declaredOut `json:"plugin"`
	}{c.Bool("dry-run"), diffOf(u.Diff), declared(u.New)}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	if out.DryRun {
		fmt.Fprintf(e.stdout, "plugin %s would change (dry run: nothing written):\n", name)
	} else {
		fmt.Fprintf(e.stdout, "updated plugin %s:\n", name)
	}
	printDiff(e.stdout, out.Changes)
	for _, n := range out.Plugin.Notes {
		fmt.Fprintf(e.stdout, "note: %s\n", n)
	}
	if !out.DryRun {
		fmt.Fprintln(e.stdout, reloadNote)
	}
	return nil
}

func pluginRemove(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("plugin remove takes one NAME")
	}
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	env, err := sourceEnv(c, e)
	if err != nil {
		return err
	}
	inst, err := pluginsource.Remove(env, c.Args().First(), c.Bool("dry-run"))
	if err != nil {
		return sourceError(err)
	}
	out := struct {
		DryRun bool      `json:"dry_run"`
		Name   string    `json:"name"`
		Dir    string    `json:"dir"`
		Source sourceOut `json:"source"`
	}{c.Bool("dry-run"), inst.Name, inst.Dir, sourceOf(inst.Record)}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	if out.DryRun {
		fmt.Fprintf(e.stdout, "would remove plugin %s (%s, from %s at %s) (dry run: nothing written)\n", out.Name, out.Dir, out.Source.where(), out.Source.pin())
		return nil
	}
	fmt.Fprintf(e.stdout, "removed plugin %s (%s); its history stays in the ledger; a running daemon drops it at its next start or reload (ductile system reload)\n", out.Name, out.Dir)
	return nil
}
