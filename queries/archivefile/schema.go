package archivefile

import _ "embed"

// Schema creates an archive file's tables (schema.sql).
//
//go:embed schema.sql
var Schema string
