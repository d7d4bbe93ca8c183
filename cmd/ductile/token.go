package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/config"
)

// tokensFileName is the tokens file token create makes beside the config
// file (and adds to its include:) when the config has none.
const tokensFileName = "tokens.yaml"

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
					"Without a tokens file, " + tokensFileName + " is created beside the config file and added to its include:.\n" +
					"Apply it to a running daemon with: ductile system reload",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "scopes", Required: true, Usage: "comma-separated scopes: " + strings.Join(config.ValidScopes, ", ")},
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
// .checksums; without one, create and revoke write it: lockIfUnlocked).
func loadTokensConfig(c *cli.Context) (*config.Config, error) {
	path := c.String("config")
	if path == "" {
		return nil, hintf(codeUsage, "give the config file with --config (or $DUCTILE_CONFIG)", "tokens live in a file the config includes, and no config file was given")
	}
	cfg, err := config.LoadUnlocked(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, withHint(codeNotFound, err, "check the path given to --config (or $DUCTILE_CONFIG)")
		}
		return nil, withHint(codeInvalidConfig, err, "fix the config first; check it with: ductile config check --config "+path)
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
	if slices.ContainsFunc(cfg.Tokens, func(t config.Token) bool { return t.Name == name }) {
		return hintf(codeConflict, "revoke it first (ductile config token revoke "+name+"), or choose another name", "a token named %q exists", name)
	}
	out := tokenCreated{Name: name, Scopes: scopes, DryRun: c.Bool("dry-run"), TokensFile: cfg.TokensFile()}
	if out.TokensFile == "" {
		out.TokensFile = filepath.Join(cfg.Dir, tokensFileName)
		out.Included = true
		if _, err := os.Stat(out.TokensFile); err == nil {
			return hintf(codeConflict, "add it to include: in "+cfg.Source+", or move it away", "%s exists but the config does not include it", out.TokensFile)
		}
	}
	out.ScopesFile = filepath.Join(filepath.Dir(out.TokensFile), "scopes", name+".json")
	if _, err := os.Stat(out.ScopesFile); err == nil {
		return hintf(codeConflict, "remove it, or choose another name", "scopes file %s exists", out.ScopesFile)
	}
	scopesJSON, err := json.Marshal(map[string][]string{"scopes": scopes})
	if err != nil {
		return err
	}
	scopesJSON = append(scopesJSON, '\n')

	var key string
	if !out.DryRun {
		key, err = newKey()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(filepath.Dir(out.TokensFile), out.ScopesFile)
		if err != nil {
			return err
		}
		entry := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, kv := range [][2]string{
			{"name", name}, {"key_hash", config.HashBytes([]byte(key))},
			{"scopes_file", filepath.ToSlash(rel)}, {"scopes_hash", config.HashBytes(scopesJSON)},
		} {
			entry.Content = append(entry.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: kv[0]},
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: kv[1]})
		}
		if err := os.MkdirAll(filepath.Dir(out.ScopesFile), 0o700); err != nil {
			return err
		}
		if err := writeFileAtomic(out.ScopesFile, scopesJSON); err != nil {
			return err
		}
		if err := editYAML(out.TokensFile, func(root *yaml.Node) error {
			appendToList(root, "tokens", entry)
			return nil
		}); err != nil {
			return err
		}
		changed := []string{out.TokensFile, out.ScopesFile}
		if out.Included {
			if err := editYAML(cfg.Source, func(root *yaml.Node) error {
				appendToList(root, "include", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: tokensFileName})
				return nil
			}); err != nil {
				return err
			}
			changed = append(changed, cfg.Source)
		}
		if out.Checksums, err = config.UpdateChecksums(cfg.ChecksumsPath(), cfg.Dir, changed...); err != nil {
			return err
		}
		if out.Locked, err = lockIfUnlocked(cfg, out.Checksums); err != nil {
			return err
		}
		// What was written must load: the daemon will read it on reload.
		if _, err := config.LoadDeferred(cfg.Source); err != nil {
			return withHint(codeInvalidConfig, err, "the token was written but the config does not load: fix it, or revoke the token")
		}
		out.Key = key
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
		fmt.Fprintf(w, "%s %s to include: in %s\n", map[bool]string{true: "would add", false: "added"}[out.DryRun], tokensFileName, displayFile(cfg, cfg.Source))
	}
	if out.DryRun {
		if !fileExists(cfg.ChecksumsPath()) {
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
	fmt.Fprintln(w, key)
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
	i := slices.IndexFunc(cfg.Tokens, func(t config.Token) bool { return t.Name == name })
	if i < 0 {
		return hintf(codeNotFound, "see the tokens with: ductile config token list", "no token named %q", name)
	}
	t := cfg.Tokens[i]
	shared := slices.ContainsFunc(cfg.Tokens, func(o config.Token) bool { return o.Name != name && o.ScopesFile == t.ScopesFile })
	w := c.App.Writer
	if c.Bool("dry-run") {
		fmt.Fprintf(w, "would revoke token %s: remove its entry from %s", name, displayFile(cfg, t.File))
		if !shared {
			fmt.Fprintf(w, " and delete %s", displayFile(cfg, t.ScopesFile))
		}
		if !fileExists(cfg.ChecksumsPath()) {
			fmt.Fprintf(w, "\nwould write %s (there is none): %s", config.ChecksumsName, lockedNote)
		}
		fmt.Fprintln(w, "\ndry run: nothing written")
		return nil
	}
	if err := editYAML(t.File, func(root *yaml.Node) error {
		return removeToken(root, name)
	}); err != nil {
		return err
	}
	changed := []string{t.File}
	if !shared {
		if err := os.Remove(t.ScopesFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		changed = append(changed, t.ScopesFile)
	}
	relocked, err := config.UpdateChecksums(cfg.ChecksumsPath(), cfg.Dir, changed...)
	if err != nil {
		return err
	}
	locked, err := lockIfUnlocked(cfg, relocked)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "revoked token %s (removed from %s)\n", name, displayFile(cfg, t.File))
	if relocked {
		fmt.Fprintf(w, "updated %s for the files changed\n", config.ChecksumsName)
	}
	if locked {
		fmt.Fprintf(w, "wrote %s (there was none): %s\n", config.ChecksumsName, lockedNote)
	}
	fmt.Fprintln(w, "apply it to a running daemon: ductile system reload (until then the daemon still accepts the key)")
	return nil
}

// lockedNote says what a .checksums that token create or revoke wrote is.
const lockedNote = "the hashes of every file the config loads, as ductile config lock records them; " +
	"the daemon refuses tokens, secrets and webhooks without it (run ductile config lock after editing the config by hand)"

// lockIfUnlocked writes a full .checksums for cfg's config file, as
// ductile config lock does, when there was none (updated is false): a
// config holding tokens does not load without one. It reports whether it
// wrote one.
func lockIfUnlocked(cfg *config.Config, updated bool) (bool, error) {
	if updated {
		return false, nil
	}
	if _, _, err := config.Lock(cfg.Source); err != nil {
		return false, withHint(codeInvalidConfig, err, "the token files were written but .checksums was not: fix the config, then run ductile config lock")
	}
	return true, nil
}

// fileExists reports whether there is a file at path.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// parseScopes splits and checks --scopes.
func parseScopes(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		switch {
		case part == "":
			continue
		case !slices.Contains(config.ValidScopes, part):
			hint := ""
			if m := config.Suggest(part, config.ValidScopes); m != "" {
				hint = ": did you mean " + m + "?"
			}
			return nil, hintf(codeUsage, routesOfScopes(), "unknown scope %q%s (valid: %s)", part, hint, strings.Join(config.ValidScopes, ", "))
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

// newKey is a new random key: the prefix and 32 random bytes, base64url.
func newKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make a key: %w", err)
	}
	return config.KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// editYAML reads the YAML file at path (a missing one is empty), lets edit
// change its top-level mapping, and writes it back atomically. It edits
// the node tree, so comments and the order of keys are kept.
func editYAML(path string, edit func(root *yaml.Node) error) error {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if doc.Kind == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		if !(root.Kind == yaml.ScalarNode && root.Tag == "!!null") {
			return fmt.Errorf("%s: the top level is not a mapping of keys", path)
		}
		*root = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", HeadComment: root.HeadComment}
	}
	if err := edit(root); err != nil {
		return err
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := enc.Close(); err != nil {
		return err
	}
	return writeFileAtomic(path, b.Bytes())
}

// appendToList appends item to the list under key of root, adding the key
// (as an empty list) when it is missing or empty.
func appendToList(root *yaml.Node, key string, item *yaml.Node) {
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != key {
			continue
		}
		v := root.Content[i+1]
		if v.Kind != yaml.SequenceNode {
			*v = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", HeadComment: v.HeadComment, LineComment: v.LineComment}
		}
		v.Content = append(v.Content, item)
		return
	}
	root.Content = append(root.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key},
		&yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{item}})
}

// removeToken removes the entry named name from root's tokens: list.
func removeToken(root *yaml.Node, name string) error {
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "tokens" || root.Content[i+1].Kind != yaml.SequenceNode {
			continue
		}
		list := root.Content[i+1]
		for j, item := range list.Content {
			for k := 0; k+1 < len(item.Content); k += 2 {
				if item.Content[k].Value == "name" && item.Content[k+1].Value == name {
					list.Content = slices.Delete(list.Content, j, j+1)
					return nil
				}
			}
		}
	}
	return fmt.Errorf("token %q: its entry was not found in the file (is it written with an alias?): remove it by hand", name)
}

// writeFileAtomic replaces path with data (mode 0600) through a temporary
// file in its directory, so a reader sees the old or the new file whole.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// displayFile shows path relative to the config directory when inside it.
func displayFile(cfg *config.Config, path string) string {
	if rel, err := filepath.Rel(cfg.Dir, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}
