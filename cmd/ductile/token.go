package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/errcode"
)

func tokenCommand() *cli.Command {
	return &cli.Command{
		Name:  "token",
		Usage: "create, list and revoke the HTTP API's bearer tokens (the tokens file)",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "make a token: write its scopes file and its entry (the key's hash) into the tokens file, print the key once",
				ArgsUsage: "NAME",
				Description: "The key is printed once, on the last line; the files hold only its hash.\n" +
					"Without a tokens file, " + config.TokensFileName + " is created beside the config file and added to its include:.\n" +
					"Apply it to a running daemon with: ductile system reload",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "scopes", Required: true, Usage: "comma-separated scopes: " + config.ScopesHelp()},
					dryRunFlag(), jsonFlag(),
				},
				Action: tokenCreate,
			},
			{
				Name:   "list",
				Usage:  "list the tokens by name and scopes (never keys)",
				Flags:  []cli.Flag{jsonFlag()},
				Action: tokenList,
			},
			{
				Name:      "revoke",
				Usage:     "remove a token's entry and its scopes file",
				ArgsUsage: "NAME",
				Flags:     []cli.Flag{dryRunFlag()},
				Action:    tokenRevoke,
			},
		},
	}
}

// loadTokensConfig loads the config a token command edits: --config is
// required, and the config must load (checksums verified if there is a
// .checksums; without one, create and revoke write it).
func loadTokensConfig(c *cli.Context) (*config.Config, error) {
	path := c.String("config")
	if path == "" {
		return nil, hintf(errcode.InvalidInput, "give the config file with --config (or $DUCTILE_CONFIG)", "tokens live in a file the config includes, and no config file was given")
	}
	cfg, err := config.LoadUnlocked(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, withHint(errcode.NotFound, err, "check the path given to --config (or $DUCTILE_CONFIG)")
		}
		return nil, withHint(errcode.InvalidConfig, err, "fix the config first; check it with: ductile config check --config "+path)
	}
	return cfg, nil
}

// tokenCreated is what token create prints with --json.
type tokenCreated struct {
	Name       string   `json:"name"`
	Scopes     []string `json:"scopes"`
	TokensFile string   `json:"tokens_file"`
	ScopesFile string   `json:"scopes_file"`
	Included   bool     `json:"included"` // the tokens file was added to the config's include:
	Checksums  bool     `json:"checksums_updated"`
	Locked     bool     `json:"checksums_written"` // there was no .checksums: one was written for every file
	DryRun     bool     `json:"dry_run"`
	Key        string   `json:"key,omitempty"`
}

func tokenCreate(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("give the token's name: ductile config token create NAME --scopes jobs:ro,…")
	}
	name := c.Args().First()
	if !config.ValidTokenName(name) {
		return usagef("invalid token name %q: use letters, digits and _ . - (up to 64, starting with a letter or digit)", name)
	}
	scopes, err := parseScopes(c.String("scopes"))
	if err != nil {
		return err
	}
	cfg, err := loadTokensConfig(c)
	if err != nil {
		return err
	}
	plan, err := config.PlanToken(cfg, name, scopes)
	if err != nil {
		return tokenEditError(err)
	}
	out := tokenCreated{Name: name, Scopes: scopes, TokensFile: plan.TokensFile, ScopesFile: plan.ScopesFile, Included: plan.Included, DryRun: c.Bool("dry-run")}
	if !out.DryRun {
		created, err := config.CreateToken(cfg, plan)
		if err != nil {
			return tokenEditError(err)
		}
		out.Checksums, out.Locked, out.Key = created.ChecksumsUpdated, created.ChecksumsWritten, created.Key
	}
	w := c.App.Writer
	if c.Bool("json") {
		return printJSON(w, out)
	}
	verb := "created"
	if out.DryRun {
		verb = "would create"
	}
	fmt.Fprintf(w, "%s token %s in %s (scopes: %s; scopes file %s)\n", verb, name, displayFile(cfg, out.TokensFile), strings.Join(scopes, ", "), displayFile(cfg, out.ScopesFile))
	if out.Included {
		fmt.Fprintf(w, "%s %s to include: in %s\n", map[bool]string{true: "would add", false: "added"}[out.DryRun], config.TokensFileName, displayFile(cfg, cfg.Source))
	}
	if out.DryRun {
		if plan.WritesChecksums {
			fmt.Fprintf(w, "would write %s (there is none): %s\n", config.ChecksumsName, lockedNote)
		}
		fmt.Fprintln(w, "dry run: nothing written, no key made")
		return nil
	}
	if out.Checksums {
		fmt.Fprintf(w, "updated %s for the files written\n", config.ChecksumsName)
	}
	if out.Locked {
		fmt.Fprintf(w, "wrote %s (there was none): %s\n", config.ChecksumsName, lockedNote)
	}
	fmt.Fprintln(w, "apply it to a running daemon: ductile system reload")
	fmt.Fprintln(w, "the key, shown only this once (ductile keeps only its hash); store it now:")
	fmt.Fprintln(w, out.Key)
	return nil
}

// tokenListed is one token as token list prints it.
type tokenListed struct {
	Name       string   `json:"name"`
	Scopes     []string `json:"scopes"`
	File       string   `json:"file"`
	ScopesFile string   `json:"scopes_file"`
}

func tokenList(c *cli.Context) error {
	cfg, err := loadTokensConfig(c)
	if err != nil {
		return err
	}
	out := []tokenListed{}
	for _, t := range cfg.Tokens {
		out = append(out, tokenListed{Name: t.Name, Scopes: t.Scopes, File: t.File, ScopesFile: t.ScopesFile})
	}
	w := c.App.Writer
	if c.Bool("json") {
		return printJSON(w, out)
	}
	if len(out) == 0 {
		fmt.Fprintln(w, "no tokens: make one with ductile config token create NAME --scopes jobs:ro,…")
		return nil
	}
	for _, t := range out {
		fmt.Fprintf(w, "%s\t%s\t%s\n", t.Name, strings.Join(t.Scopes, ","), displayFile(cfg, t.File))
	}
	return nil
}

func tokenRevoke(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("give the token's name: ductile config token revoke NAME")
	}
	name := c.Args().First()
	cfg, err := loadTokensConfig(c)
	if err != nil {
		return err
	}
	plan, err := config.PlanRevoke(cfg, name)
	if err != nil {
		return tokenEditError(err)
	}
	t := plan.Token
	w := c.App.Writer
	if c.Bool("dry-run") {
		fmt.Fprintf(w, "would revoke token %s: remove its entry from %s", name, displayFile(cfg, t.File))
		if !plan.SharedScopesFile {
			fmt.Fprintf(w, " and delete %s", displayFile(cfg, t.ScopesFile))
		}
		if plan.WritesChecksums {
			fmt.Fprintf(w, "\nwould write %s (there is none): %s", config.ChecksumsName, lockedNote)
		}
		fmt.Fprintln(w, "\ndry run: nothing written")
		return nil
	}
	revoked, err := config.RevokeToken(cfg, plan)
	if err != nil {
		return tokenEditError(err)
	}
	fmt.Fprintf(w, "revoked token %s (removed from %s)\n", name, displayFile(cfg, t.File))
	if revoked.ChecksumsUpdated {
		fmt.Fprintf(w, "updated %s for the files changed\n", config.ChecksumsName)
	}
	if revoked.ChecksumsWritten {
		fmt.Fprintf(w, "wrote %s (there was none): %s\n", config.ChecksumsName, lockedNote)
	}
	fmt.Fprintln(w, "apply it to a running daemon: ductile system reload (until then the daemon still accepts the key)")
	return nil
}

// lockedNote says what a .checksums that token create or revoke wrote is.
const lockedNote = "the hashes of every file the config loads, as ductile config lock records them; " +
	"the daemon refuses tokens, secrets and webhooks without it (run ductile config lock after editing the config by hand)"

// tokenEditError is the CLI error of a refused or failed token edit
// (config.TokenEditError): its code from its kind, its message and hint.
func tokenEditError(err error) error {
	var te *config.TokenEditError
	if !errors.As(err, &te) {
		return err
	}
	code := errcode.InvalidConfig // the config the edit wrote does not load
	switch {
	case errors.Is(te.Err, config.ErrTokenExists):
		code = errcode.Conflict
	case errors.Is(te.Err, config.ErrNoToken):
		code = errcode.NotFound
	case errors.Is(te.Err, config.ErrInvalidToken):
		code = errcode.InvalidInput
	}
	return hintf(code, te.Hint, "%s", te.Message)
}

// parseScopes splits and checks --scopes.
func parseScopes(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		switch {
		case part == "":
			continue
		case !config.ValidScope(part):
			hint := ""
			if m := config.Suggest(part, config.ValidScopes); m != "" {
				hint = ": did you mean " + m + "?"
			}
			return nil, hintf(errcode.InvalidInput, routesOfScopes(), "unknown scope %q%s (valid: %s)", part, hint, config.ScopesHelp())
		case !slices.Contains(out, part):
			out = append(out, part)
		}
	}
	if len(out) == 0 {
		return nil, usagef("give at least one scope with --scopes (valid: %s)", strings.Join(config.ValidScopes, ", "))
	}
	return out, nil
}

// routesOfScopes says which routes of the API each scope opens (a :rw
// scope opens its :ro scope's too).
func routesOfScopes() string {
	routes := map[auth.Scope][]string{}
	for _, r := range api.RouteScopes() {
		if r.Scope == "" {
			continue
		}
		route := r.Method + " " + r.Path
		if r.When != "" {
			route += " (" + r.When + ")"
		}
		routes[r.Scope] = append(routes[r.Scope], route)
	}
	var parts []string
	for _, scope := range auth.Scopes {
		switch {
		case scope == auth.All:
			parts = append(parts, "* opens every route")
		case len(routes[scope]) == 0:
			parts = append(parts, string(scope)+" opens no route yet")
		default:
			parts = append(parts, string(scope)+" opens "+strings.Join(routes[scope], ", "))
		}
	}
	return "which route needs which: " + strings.Join(parts, "; ") + "; a :rw scope opens its :ro scope's routes too"
}

// displayFile shows path relative to the config directory when inside it.
func displayFile(cfg *config.Config, path string) string {
	if rel, err := filepath.Rel(cfg.Dir, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}
