package pluginhost_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/plugins"
)

// bundledRoot holds the bundled plugins, unpacked once before any test runs:
// writing an executable while another test forks can make exec fail with
// ETXTBSY, so no test writes a file it then executes.
var bundledRoot string

func TestMain(m *testing.M) {
	// Become the subreaper of every plugin process the tests start, so an
	// orphaned grandchild is re-parented to this process and the tests can
	// reap it and prove (kill(-pgid, 0) == ESRCH) that its group is gone,
	// without depending on how promptly PID 1 reaps.
	if err := becomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "become the subreaper:", err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "pluginhost-bundled-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bundledRoot = dir
	if err := plugins.Unpack(dir); err != nil {
		fmt.Fprintln(os.Stderr, "unpack bundled plugins:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// fixture returns a Plugin for the script testdata/runner/<name>.sh. Run
// needs only Dir and Entrypoint; discovery is tested separately.
func fixture(t testing.TB, name string) *pluginhost.Plugin {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "runner"))
	require.NoError(t, err)
	return &pluginhost.Plugin{
		Name:       name,
		Dir:        dir,
		Entrypoint: filepath.Join(dir, name+".sh"),
		Manifest:   &pluginhost.Manifest{Name: name},
	}
}
