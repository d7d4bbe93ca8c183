package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/events"
)

// Token is one entry of tokens: (spec §9.4): a bearer token of the HTTP
// API and the scopes it grants. The config holds the key's hash, never the
// key itself once loaded.
type Token struct {
	Name string
	// KeyHash is "blake3:<hex>" of the key: key_hash as written, or the
	// hash of key (a ${VAR} from the environment).
	KeyHash string
	// Scopes are the scopes of ScopesFile, validated (ValidScopes).
	Scopes []string
	// ScopesFile is the absolute path of the token's scopes file.
	ScopesFile string
	// ScopesHash is "blake3:<hex>" of ScopesFile as read; it equals the
	// entry's scopes_hash.
	ScopesHash string
	// File is the absolute path of the config file that holds the entry.
	File string
}

// KeyPrefix starts every key ductile config token create makes, so that
// a key is recognizable (in a file where it should not be, in a log).
const KeyPrefix = "dtk_"

var (
	hashPattern      = regexp.MustCompile(`^blake3:[0-9a-f]{64}$`)
	tokenNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// ValidTokenName reports whether name may name a token or a secret:
// letters, digits, and _ . - after the first, up to 64.
func ValidTokenName(name string) bool { return tokenNamePattern.MatchString(name) }

// scopesFile is the content of a scopes file.
type scopesFile struct {
	Scopes []string `json:"scopes"`
}

// tokens reads the tokens: list. Entries of several files are concatenated
// (merge); names must be unique across them.
func (l *loader) tokens(n *yaml.Node, path string, cfg *Config) {
	if n.Kind != yaml.SequenceNode {
		l.fail(n, path, "must be a list of tokens, e.g. - {name: ci, key_hash: blake3:…, scopes_file: scopes/ci.json, scopes_hash: blake3:…} (ductile config token create writes one)")
		return
	}
	names := map[string]*yaml.Node{}
	keys := map[string]string{}
	for i, item := range n.Content {
		ipath := indexPath(path, i)
		t, ok := l.token(item, ipath)
		if !ok {
			continue
		}
		if first, dup := names[t.Name]; dup {
			l.fail(item, ipath+".name", "token %q is defined twice (first at %s:%d): rename or remove one", t.Name, l.origin[first], first.Line)
			continue
		}
		names[t.Name] = item
		if other, dup := keys[t.KeyHash]; dup {
			l.fail(item, ipath, "token %q has the same key as token %q: give each token its own key (ductile config token create makes one)", t.Name, other)
			continue
		}
		keys[t.KeyHash] = t.Name
		cfg.Tokens = append(cfg.Tokens, t)
	}
}

// token reads one entry of tokens:.
func (l *loader) token(n *yaml.Node, path string) (Token, bool) {
	var t Token
	var key, keyHash, scopesFileName, scopesHash *yaml.Node
	scalar := func(dst **yaml.Node) func(v *yaml.Node, path string) {
		return func(v *yaml.Node, path string) {
			if _, ok := l.str(v, path); ok {
				*dst = v
			}
		}
	}
	var nameNode *yaml.Node
	before := len(l.errs)
	l.object(n, path, "",
		field{"name", scalar(&nameNode)},
		field{"key", scalar(&key)},
		field{"key_hash", scalar(&keyHash)},
		field{"scopes_file", scalar(&scopesFileName)},
		field{"scopes_hash", scalar(&scopesHash)},
	)
	if n.Kind != yaml.MappingNode || len(l.errs) > before {
		return t, false
	}
	ok := true
	switch {
	case nameNode == nil:
		l.fail(n, joinPath(path, "name"), "missing: name the token (letters, digits, _ . -), e.g. name: ci")
		ok = false
	case !ValidTokenName(nameNode.Value):
		l.fail(nameNode, joinPath(path, "name"), "invalid token name %q: use letters, digits and _ . - (up to 64, starting with a letter or digit)", nameNode.Value)
		ok = false
	default:
		t.Name = nameNode.Value
	}
	switch {
	case key != nil && keyHash != nil:
		l.fail(key, joinPath(path, "key"), "set key or key_hash, not both: keep key_hash (the file then holds no key)")
		ok = false
	case key == nil && keyHash == nil:
		l.fail(n, joinPath(path, "key_hash"), "missing: set key_hash: blake3:<hash of the key> (ductile config token create writes it) or key: ${ENV_VAR} naming a variable that holds the key")
		ok = false
	case key != nil && !l.interpolated[key]:
		l.fail(key, joinPath(path, "key"), "a key written in the file is plaintext: put it in the environment (key: ${DUCTILE_TOKEN_%s}) or store only its hash (key_hash: blake3:…; ductile config token create writes one)", envName(t.Name))
		ok = false
	case key != nil && key.Value == "":
		l.fail(key, joinPath(path, "key"), "the environment variable holds an empty key: set it to the token's key")
		ok = false
	case key != nil:
		t.KeyHash = HashBytes([]byte(key.Value))
	case strings.HasPrefix(keyHash.Value, KeyPrefix):
		l.fail(keyHash, joinPath(path, "key_hash"), "this is a key, not its hash: the file must not hold it; revoke the token (ductile config token revoke) and create a new one")
		ok = false
	case !hashPattern.MatchString(keyHash.Value):
		l.fail(keyHash, joinPath(path, "key_hash"), "must be blake3: and 64 lowercase hex digits (the BLAKE3 hash of the key), got %s", show(keyHash))
		ok = false
	default:
		t.KeyHash = keyHash.Value
	}
	if !l.scopes(n, path, scopesFileName, scopesHash, &t) {
		ok = false
	}
	return t, ok
}

// scopes reads and checks the token's scopes file into t.
func (l *loader) scopes(n *yaml.Node, path string, fileNode, hashNode *yaml.Node, t *Token) bool {
	fpath, hpath := joinPath(path, "scopes_file"), joinPath(path, "scopes_hash")
	if fileNode == nil || fileNode.Value == "" {
		l.fail(n, fpath, `missing: name the token's scopes file, a JSON file {"scopes": ["jobs:ro", …]} relative to this file (ductile config token create writes one)`)
		return false
	}
	holder := l.origin[fileNode]
	if !filepath.IsAbs(holder) {
		holder = filepath.Join(l.dir, holder)
	}
	target, err := expandHome(fileNode.Value)
	if err != nil {
		l.fail(fileNode, fpath, "%v", err)
		return false
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(holder), target)
	}
	t.File, t.ScopesFile = holder, filepath.Clean(target)
	data, st, err := readConfigFile(t.ScopesFile)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		if errors.Is(err, fs.ErrNotExist) {
			l.fail(fileNode, fpath, "scopes file %s not found (looked for %s, relative to the directory of %s): fix the path, or create the token again with ductile config token create", fileNode.Value, t.ScopesFile, l.display(holder))
		} else {
			l.fail(fileNode, fpath, "cannot read scopes file %s: %v", fileNode.Value, err)
		}
		return false
	}
	t.ScopesHash = HashBytes(data)
	l.stats[t.ScopesFile] = st
	ok := true
	switch {
	case hashNode == nil:
		l.fail(n, hpath, "missing: add scopes_hash: %s (the hash of %s as it is now) so that a change to the scopes file is caught", t.ScopesHash, fileNode.Value)
		ok = false
	case !hashPattern.MatchString(hashNode.Value):
		l.fail(hashNode, hpath, "must be blake3: and 64 lowercase hex digits, got %s", show(hashNode))
		ok = false
	case hashNode.Value != t.ScopesHash:
		l.fail(hashNode, hpath, "scopes file %s does not match its hash (the file hashes to %s): if you changed it, set scopes_hash: %s; if not, restore the file", fileNode.Value, t.ScopesHash, t.ScopesHash)
		ok = false
	}
	var sf scopesFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sf); err != nil || dec.More() {
		if err == nil {
			err = errors.New("more than one JSON value")
		}
		l.fail(fileNode, fpath, `scopes file %s is not {"scopes": [...]}: %v`, fileNode.Value, err)
		return false
	}
	if len(sf.Scopes) == 0 {
		l.fail(fileNode, fpath, `scopes file %s grants no scope: list at least one in "scopes" (valid: %s)`, fileNode.Value, strings.Join(ValidScopes, ", "))
		return false
	}
	for _, s := range sf.Scopes {
		if !ValidScope(s) {
			l.fail(fileNode, fpath, "scopes file %s: unknown scope %q%s (valid: %s)", fileNode.Value, s, didYouMean(s, ValidScopes), ScopesHelp())
			ok = false
		}
	}
	t.Scopes = sf.Scopes
	return ok
}

// secrets reads the secrets: mapping (name → value, ${VAR} allowed).
func (l *loader) secrets(n *yaml.Node, path string, cfg *Config) {
	if n.Kind != yaml.MappingNode {
		l.fail(n, path, "must be a mapping of secret name to value, e.g. secrets: {github: ${GITHUB_WEBHOOK_SECRET}}")
		return
	}
	if cfg.Secrets == nil {
		cfg.Secrets = map[string]string{}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		spath := joinPath(path, k.Value)
		if !ValidTokenName(k.Value) {
			l.fail(k, spath, "invalid secret name %q: use letters, digits and _ . - (up to 64)", k.Value)
			continue
		}
		if v.Kind != yaml.ScalarNode || isNull(v) || v.Value == "" {
			l.fail(v, spath, "must be a non-empty string, e.g. %s: ${%s}", k.Value, envName(k.Value))
			continue
		}
		cfg.Secrets[k.Value] = v.Value
	}
}

// envName suggests an environment variable name for name.
func envName(name string) string {
	if name == "" {
		return "NAME"
	}
	return strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
}

// TokensFile is the file that holds tokens: (the last one when several
// do), else the one holding secrets:, else "".
func (c *Config) TokensFile() string {
	for _, key := range []string{"tokens", "secrets"} {
		for i := len(c.Files) - 1; i >= 0; i-- {
			if slices.Contains(c.fileKeys[c.Files[i]], key) {
				return c.Files[i]
			}
		}
	}
	return ""
}

// tokensDigest is what Settings records of the tokens and secrets: names
// and scopes, and one hash over the keys' hashes and one over the secrets.
func (c *Config) tokensDigest() (tokens []events.TokenSettings, sections map[string]string) {
	sections = map[string]string{}
	if len(c.Tokens) > 0 {
		var keys []string
		for _, t := range c.Tokens {
			tokens = append(tokens, events.TokenSettings{Name: t.Name, Scopes: slices.Clone(t.Scopes)})
			keys = append(keys, t.Name+"="+t.KeyHash)
		}
		sections["tokens"] = HashValue(keys)
	}
	if len(c.Secrets) > 0 {
		sections["secrets"] = HashValue(c.Secrets)
	}
	return tokens, sections
}
