package pipeline_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/pipeline"
)

// TestDocsExamplesCompile: every yaml example of docs/pipelines.md compiles.
func TestDocsExamplesCompile(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/pipelines.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1)
	require.GreaterOrEqual(t, len(blocks), 7)
	for _, b := range blocks {
		set, err := pipeline.Compile(load(t, string(b[1])), nil)
		require.NoError(t, err, "%s", b[1])
		require.NotEmpty(t, set.Pipelines)
	}
}
