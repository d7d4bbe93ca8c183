// Command sqlc-gen-zombiezen is an sqlc process plugin that generates Go code
// calling zombiezen.com/go/sqlite directly (no database/sql).
//
// See README.md for the generated API and the type mapping.
package main

import "github.com/sqlc-dev/plugin-sdk-go/codegen"

func main() {
	codegen.Run(generate)
}
