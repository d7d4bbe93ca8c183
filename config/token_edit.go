package config

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

	"go.yaml.in/yaml/v3"
)

// Editing the tokens file: what ductile config token create and revoke do,
// here so that any front end (the CLI, a web page) makes the same edit.
// Each is planned first (PlanToken, PlanRevoke: nothing written, what a
// dry run shows), then done (CreateToken, RevokeToken). The files are
// edited as YAML node trees, so comments and the order of keys are kept,
// and each is replaced atomically.

// TokensFileName is the tokens file CreateToken makes beside the config
// file (and adds to its include:) when the config has none.
const TokensFileName = "tokens.yaml"

// The kinds of a *TokenEditError.
var (
	// ErrTokenExists: a token of that name, or a file CreateToken would
	// make, exists already.
	ErrTokenExists = errors.New("token exists")
	// ErrNoToken: no token has the name given.
	ErrNoToken = errors.New("no such token")
	// ErrInvalidToken: the name or a scope is not valid.
	ErrInvalidToken = errors.New("invalid token")
)

// TokenEditError is a token edit refused or failed: what is wrong, what to
// do next, and its kind (ErrTokenExists, ErrNoToken, ErrInvalidToken, or
// the error of loading the config the edit wrote).
type TokenEditError struct {
	Err     error
	Message string
	Hint    string
}

func (e *TokenEditError) Error() string { return e.Message }

// Unwrap is the kind of the error.
func (e *TokenEditError) Unwrap() error { return e.Err }

func tokenEditErrorf(kind error, hint, format string, args ...any) error {
	return &TokenEditError{Err: kind, Message: fmt.Sprintf(format, args...), Hint: hint}
}

// TokenPlan is what CreateToken writes for a new token.
type TokenPlan struct {
	Name   string
	Scopes []string
	// TokensFile is the file its entry goes into: the config's tokens
	// file, else TokensFileName beside the config file.
	TokensFile string
	// ScopesFile is its new scopes file, scopes/NAME.json beside TokensFile.
	ScopesFile string
	// Included: TokensFile is new and is added to the config's include:.
	Included bool
	// WritesChecksums: there is no .checksums, and one is written for
	// every file the config loads (a config holding tokens needs one).
	WritesChecksums bool
}

// PlanToken is what creating the token name with scopes in cfg (loaded
// with LoadUnlocked) writes, or why it cannot (a *TokenEditError).
func PlanToken(cfg *Config, name string, scopes []string) (TokenPlan, error) {
	if !ValidTokenName(name) {
		return TokenPlan{}, tokenEditErrorf(ErrInvalidToken, "use letters, digits and _ . - (up to 64, starting with a letter or digit)", "invalid token name %q", name)
	}
	for _, s := range scopes {
		if !ValidScope(s) {
			return TokenPlan{}, tokenEditErrorf(ErrInvalidToken, "valid scopes: "+ScopesHelp(), "unknown scope %q", s)
		}
	}
	if slices.ContainsFunc(cfg.Tokens, func(t Token) bool { return t.Name == name }) {
		return TokenPlan{}, tokenEditErrorf(ErrTokenExists, "revoke it first (ductile config token revoke "+name+"), or choose another name", "a token named %q exists", name)
	}
	p := TokenPlan{Name: name, Scopes: scopes, TokensFile: cfg.TokensFile(), WritesChecksums: !fileExists(cfg.ChecksumsPath())}
	if p.TokensFile == "" {
		p.TokensFile = filepath.Join(cfg.Dir, TokensFileName)
		p.Included = true
		if fileExists(p.TokensFile) {
			return TokenPlan{}, tokenEditErrorf(ErrTokenExists, "add it to include: in "+cfg.Source+", or move it away", "%s exists but the config does not include it", p.TokensFile)
		}
	}
	p.ScopesFile = filepath.Join(filepath.Dir(p.TokensFile), "scopes", name+".json")
	if fileExists(p.ScopesFile) {
		return TokenPlan{}, tokenEditErrorf(ErrTokenExists, "remove it, or choose another name", "scopes file %s exists", p.ScopesFile)
	}
	return p, nil
}

// TokenCreated is what CreateToken did.
type TokenCreated struct {
	TokenPlan
	// Key is the new key: shown once, never stored (the files hold its hash).
	Key string
	// ChecksumsUpdated: .checksums was there and now lists the files written.
	ChecksumsUpdated bool
	// ChecksumsWritten: there was no .checksums; one was written for every
	// file the config loads.
	ChecksumsWritten bool
}

// CreateToken makes a key and writes plan (PlanToken of cfg): the scopes
// file, the entry (the key's hash) in the tokens file, the include: of a
// new tokens file, and .checksums. What it wrote must load (a
// *TokenEditError wrapping why not).
func CreateToken(cfg *Config, plan TokenPlan) (TokenCreated, error) {
	out := TokenCreated{TokenPlan: plan}
	scopesJSON, err := json.Marshal(map[string][]string{"scopes": plan.Scopes})
	if err != nil {
		return out, err
	}
	scopesJSON = append(scopesJSON, '\n')
	key, err := newKey()
	if err != nil {
		return out, err
	}
	rel, err := filepath.Rel(filepath.Dir(plan.TokensFile), plan.ScopesFile)
	if err != nil {
		return out, err
	}
	entry := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, kv := range [][2]string{
		{"name", plan.Name}, {"key_hash", HashBytes([]byte(key))},
		{"scopes_file", filepath.ToSlash(rel)}, {"scopes_hash", HashBytes(scopesJSON)},
	} {
		entry.Content = append(entry.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: kv[0]},
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: kv[1]})
	}
	if err := os.MkdirAll(filepath.Dir(plan.ScopesFile), 0o700); err != nil {
		return out, err
	}
	if err := writeFileAtomic(plan.ScopesFile, scopesJSON); err != nil {
		return out, err
	}
	if err := editYAML(plan.TokensFile, func(root *yaml.Node) error {
		appendToList(root, "tokens", entry)
		return nil
	}); err != nil {
		return out, err
	}
	changed := []string{plan.TokensFile, plan.ScopesFile}
	if plan.Included {
		if err := editYAML(cfg.Source, func(root *yaml.Node) error {
			appendToList(root, "include", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: TokensFileName})
			return nil
		}); err != nil {
			return out, err
		}
		changed = append(changed, cfg.Source)
	}
	if out.ChecksumsUpdated, out.ChecksumsWritten, err = relock(cfg, changed); err != nil {
		return out, err
	}
	// What was written must load: the daemon will read it on reload.
	if _, err := LoadDeferred(cfg.Source); err != nil {
		return out, &TokenEditError{Err: err, Message: err.Error(), Hint: "the token was written but the config does not load: fix it, or revoke the token"}
	}
	out.Key = key
	return out, nil
}

// RevokePlan is what RevokeToken changes.
type RevokePlan struct {
	// Token is the token revoked: its entry leaves Token.File.
	Token Token
	// SharedScopesFile: another token uses its scopes file, which stays.
	SharedScopesFile bool
	// WritesChecksums: there is no .checksums, and one is written.
	WritesChecksums bool
}

// PlanRevoke is what revoking the token name of cfg (loaded with
// LoadUnlocked) changes, or a *TokenEditError of ErrNoToken.
func PlanRevoke(cfg *Config, name string) (RevokePlan, error) {
	i := slices.IndexFunc(cfg.Tokens, func(t Token) bool { return t.Name == name })
	if i < 0 {
		return RevokePlan{}, tokenEditErrorf(ErrNoToken, "see the tokens with: ductile config token list", "no token named %q", name)
	}
	t := cfg.Tokens[i]
	return RevokePlan{
		Token:            t,
		SharedScopesFile: slices.ContainsFunc(cfg.Tokens, func(o Token) bool { return o.Name != name && o.ScopesFile == t.ScopesFile }),
		WritesChecksums:  !fileExists(cfg.ChecksumsPath()),
	}, nil
}

// TokenRevoked is what RevokeToken did to .checksums.
type TokenRevoked struct {
	ChecksumsUpdated, ChecksumsWritten bool
}

// RevokeToken does plan (PlanRevoke of cfg): it removes the token's entry,
// its scopes file unless shared, and updates .checksums. A running daemon
// accepts the key until it reloads.
func RevokeToken(cfg *Config, plan RevokePlan) (TokenRevoked, error) {
	var out TokenRevoked
	t := plan.Token
	if err := editYAML(t.File, func(root *yaml.Node) error {
		return removeToken(root, t.Name)
	}); err != nil {
		return out, err
	}
	changed := []string{t.File}
	if !plan.SharedScopesFile {
		if err := os.Remove(t.ScopesFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return out, err
		}
		changed = append(changed, t.ScopesFile)
	}
	var err error
	out.ChecksumsUpdated, out.ChecksumsWritten, err = relock(cfg, changed)
	return out, err
}

// relock updates the entries of changed in cfg's .checksums or, when there
// is none, writes a full one as ductile config lock does: a config holding
// tokens does not load without one.
func relock(cfg *Config, changed []string) (updated, written bool, err error) {
	if updated, err = UpdateChecksums(cfg.ChecksumsPath(), cfg.Dir, changed...); err != nil || updated {
		return updated, false, err
	}
	if _, _, err := Lock(cfg.Source); err != nil {
		return false, false, &TokenEditError{Err: err, Message: err.Error(), Hint: "the token files were written but .checksums was not: fix the config, then run ductile config lock"}
	}
	return false, true, nil
}

// fileExists reports whether there is a file at path.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// newKey is a new random key: the prefix and 32 random bytes, base64url.
func newKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make a key: %w", err)
	}
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
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
	// A link is followed, so the file it names is replaced, not the link;
	// an existing file keeps its mode (a new one is 0600: it may hold keys).
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
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
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The rename is durable once the directory is.
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}
