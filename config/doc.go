// Package config turns config.yaml, and the files it includes, into one
// validated, typed Config.
//
// Load reads the file and its include: entries (files, or directories of
// *.yaml/*.yml in lexical order), merges them in load order, replaces ${VAR}
// placeholders in string values, applies defaults and validates every key.
// Problems come back together as a *ValidationError whose lines each name the
// file, the line, the dotted key path and the fix. Default returns the settings
// used when there is no file at all.
//
// The rules (merge order, interpolation, defaults) are written up for operators
// in docs/config-reference.md.
package config
