package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// This file is named to sort last: go test runs a package's tests in the
// order of its files (by name), then of their source.

// TestZOpenAPIResponsesAreReal runs after the others (this file sorts
// last): every response status the document names was produced
// by some test.
func TestZOpenAPIResponsesAreReal(t *testing.T) {
	f := start(t, nil)
	checked := 0
	for path, item := range f.server.OpenAPI().Paths {
		ops := map[string]*opRef{}
		if item.Get != nil {
			ops["GET"] = &opRef{responses: keys(item.Get.Responses)}
		}
		if item.Post != nil {
			ops["POST"] = &opRef{responses: keys(item.Post.Responses)}
		}
		for method, op := range ops {
			for _, code := range op.responses {
				if code == "default" {
					continue
				}
				statuses.Lock()
				seen := statuses.seen[method+" "+path][atoi(code)]
				statuses.Unlock()
				require.True(t, seen, "%s %s documents %s but no test produced it", method, path, code)
				checked++
			}
		}
	}
	require.Greater(t, checked, 30)
}
