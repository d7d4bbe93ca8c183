package config

import "go.yaml.in/yaml/v3"

// FieldAt is a FieldError at n, a node inside Pipelines, API or Webhooks:
// what the features that validate those sections report (Position is the
// same place as text).
func (c *Config) FieldAt(n *yaml.Node, path, msg string) FieldError {
	fe := FieldError{Path: path, Msg: msg}
	if n != nil {
		fe.File, fe.Line = c.origin[n], n.Line
	}
	return fe
}

// SortErrors orders errs by file (in load order), then line, as Load and
// Check report theirs.
func (c *Config) SortErrors(errs []FieldError) {
	sortFieldErrors(errs, c.Files, c.Dir)
}
