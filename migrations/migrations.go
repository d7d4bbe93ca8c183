// Package migrations holds the goose SQL migrations that create the ledger
// and its projections, embedded so the binary applies them on every start.
package migrations

import "embed"

// FS holds every migration file, named NNNNN_description.sql (zero-padded so
// that sqlc, which reads them in lexical order, sees them in goose's order).
//
//go:embed *.sql
var FS embed.FS
