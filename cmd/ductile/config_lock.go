package main

import (
	"fmt"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/errcode"
)

func lockCommand() *cli.Command {
	return &cli.Command{
		Name:  "lock",
		Usage: "record the BLAKE3 hash of every file the config loads in .checksums beside it",
		Description: "Once locked, the daemon refuses to start or reload while a file holding tokens:,\n" +
			"secrets: or webhooks:, or a scopes file, differs from .checksums; other files only warn.\n" +
			"A config with such files is refused without .checksums: lock it once (token create does).\n" +
			"Run it again after changing the config on purpose. b3sum --check .checksums verifies it too.",
		Flags:  []cli.Flag{dryRunFlag(), jsonFlag()},
		Action: configLock,
	}
}

// lockedFile is one file config lock records.
type lockedFile struct {
	Path   string `json:"path"`
	BLAKE3 string `json:"blake3"`
	// Refuses is true for a file whose change refuses a start or reload.
	Refuses bool `json:"refuses"`
	// Change is "added", "changed" or "" against the previous .checksums.
	Change string `json:"change,omitempty"`
}

// lockOutput is what config lock prints with --json.
type lockOutput struct {
	Checksums string       `json:"checksums"`
	Files     []lockedFile `json:"files"`
	DryRun    bool         `json:"dry_run"`
}

func configLock(c *cli.Context) error {
	path := c.String("config")
	if path == "" {
		return hintf(errcode.InvalidInput, "give the config file with --config (or $DUCTILE_CONFIG)", "there is no config file to lock")
	}
	cfg, err := config.LoadUnverified(path)
	if err != nil {
		return withHint(errcode.InvalidConfig, err, "fix the config first: a config that does not load is not locked")
	}
	files := cfg.Checksums()
	previous, err := config.ReadChecksums(cfg.ChecksumsPath(), cfg.Dir)
	if err != nil {
		previous = nil // unreadable: written afresh
	}
	out := lockOutput{Checksums: cfg.ChecksumsPath(), DryRun: c.Bool("dry-run"), Files: []lockedFile{}}
	for _, f := range files {
		lf := lockedFile{Path: f.Path, BLAKE3: f.BLAKE3, Refuses: cfg.HighSecurity(f.Path)}
		switch i := slices.IndexFunc(previous, func(p config.FileHash) bool { return p.Path == f.Path }); {
		case i < 0:
			lf.Change = "added"
		case previous[i].BLAKE3 != f.BLAKE3:
			lf.Change = "changed"
		}
		out.Files = append(out.Files, lf)
	}
	if !out.DryRun {
		if err := config.WriteChecksums(out.Checksums, cfg.Dir, files); err != nil {
			return err
		}
	}
	w := c.App.Writer
	if c.Bool("json") {
		return printJSON(w, out)
	}
	verb := "wrote"
	if out.DryRun {
		verb = "would write"
	}
	fmt.Fprintf(w, "%s %s (%d files):\n", verb, displayFile(cfg, out.Checksums), len(files))
	for _, f := range out.Files {
		tier := "warns"
		if f.Refuses {
			tier = "refuses"
		}
		note := ""
		if f.Change != "" {
			note = " (" + f.Change + ")"
		}
		fmt.Fprintf(w, "  %s  %s  a change %s%s\n", f.BLAKE3, displayFile(cfg, f.Path), tier, note)
	}
	return nil
}
