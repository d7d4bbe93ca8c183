// Package docs embeds the reference pages the binary serves (the MCP
// server's resources): the event catalogue and the config reference.
package docs

import _ "embed"

// Events is docs/events.md, the event catalogue.
//
//go:embed events.md
var Events string

// ConfigReference is docs/config-reference.md, the config reference.
//
//go:embed config-reference.md
var ConfigReference string
