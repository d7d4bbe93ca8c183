package auth

import (
	"bytes"
	"crypto/subtle"
	"encoding/hex"
	"strings"

	"github.com/zeebo/blake3"

	"github.com/ductile/ductile/config"
)

// Registry holds the tokens and secrets of one applied config: the API's
// Guard and the webhooks' Secrets. It keeps the BLAKE3 hash of each key,
// never the key. Build a new one per applied config (auth.New); it is
// read-only and safe for concurrent use.
type Registry struct {
	tokens  []entry
	secrets map[string][]byte
}

// entry is one token: its name, key hash and scopes.
type entry struct {
	name    string
	keyHash [32]byte
	scopes  []Scope
}

var (
	_ Guard         = (*Registry)(nil)
	_ WorkerLimiter = (*Registry)(nil)
	_ Secrets       = (*Registry)(nil)
)

// New builds the Registry of cfg's tokens and secrets. A nil cfg, or one
// without tokens, gives a Registry every Check refuses.
func New(cfg *config.Config) *Registry {
	r := &Registry{secrets: map[string][]byte{}}
	if cfg == nil {
		return r
	}
	for _, t := range cfg.Tokens {
		sum, err := hex.DecodeString(strings.TrimPrefix(t.KeyHash, "blake3:"))
		if err != nil || len(sum) != 32 {
			continue // config validated the hash; never match a malformed one
		}
		e := entry{name: t.Name}
		copy(e.keyHash[:], sum)
		for _, s := range t.Scopes {
			e.scopes = append(e.scopes, Scope(s))
		}
		r.tokens = append(r.tokens, e)
	}
	for name, value := range cfg.Secrets {
		r.secrets[name] = []byte(value)
	}
	return r
}

// Len is the number of tokens: 0 means every request is refused (the
// daemon tells the user how to make one).
func (r *Registry) Len() int { return len(r.tokens) }

// Check parses authorization ("Bearer <key>"), finds the token whose key
// it is and checks that its scopes grant need. It returns the token's name,
// ErrUnauthorized for a missing, malformed or unknown key, or ErrForbidden
// when the token lacks the scope. The presented key is hashed and compared
// with every token's key hash in constant time, whichever matches.
func (r *Registry) Check(authorization string, need Scope) (string, error) {
	t, ok := r.find(authorization)
	if !ok {
		return "", ErrUnauthorized
	}
	if !Grants(t.scopes, need) {
		return t.name, ErrForbidden
	}
	return t.name, nil
}

// WorkerPlugins are the plugins the worker scope of authorization's token
// is limited to (WorkerPlugins of its scopes); an unknown key is not
// limited here (Check refuses it).
func (r *Registry) WorkerPlugins(authorization string) ([]string, bool) {
	t, ok := r.find(authorization)
	if !ok {
		return nil, false
	}
	return WorkerPlugins(t.scopes)
}

// find is the token whose key authorization carries, compared in constant
// time as Check does.
func (r *Registry) find(authorization string) (entry, bool) {
	key, ok := bearer(authorization)
	if !ok {
		return entry{}, false
	}
	sum := blake3.Sum256([]byte(key))
	found := -1
	for i := range r.tokens {
		if subtle.ConstantTimeCompare(sum[:], r.tokens[i].keyHash[:]) == 1 {
			found = i // no early exit: the time does not say which entry matched
		}
	}
	if found < 0 {
		return entry{}, false
	}
	return r.tokens[found], true
}

// bearer returns the key of an "Authorization: Bearer <key>" value. The
// scheme is case-insensitive (RFC 9110); the key is one non-empty word.
func bearer(authorization string) (string, bool) {
	scheme, key, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	key = strings.TrimLeft(key, " ")
	if key == "" || strings.ContainsAny(key, " \t\r\n") {
		return "", false
	}
	return key, true
}

// Secret returns a copy of the value of the named secret (webhook
// secret_ref).
func (r *Registry) Secret(name string) ([]byte, bool) {
	v, ok := r.secrets[name]
	return bytes.Clone(v), ok
}

// Tokens lists the tokens' names and scopes, in config order (never keys).
func (r *Registry) Tokens() []TokenInfo {
	out := make([]TokenInfo, len(r.tokens))
	for i, t := range r.tokens {
		out[i] = TokenInfo{Name: t.name, Scopes: append([]Scope(nil), t.scopes...)}
	}
	return out
}

// TokenInfo is a token's name and scopes.
type TokenInfo struct {
	Name   string  `json:"name"`
	Scopes []Scope `json:"scopes"`
}
