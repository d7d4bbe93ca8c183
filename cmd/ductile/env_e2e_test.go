package main_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// inProcessTests are the tests that run the CLI inside the test process,
// where the caller's environment would reach it; the e2e tests give their
// subprocesses cleanEnv.
var inProcessTests = []string{
	"TestNormalizeArgs", "TestNormalizeArgsKeepsTheInput", "TestNormalizedArgsParse",
	"TestVersionText", "TestWantsJSON", "TestExitCode", "TestLogFormat",
}

// TestSuiteIgnoresCallerEnvironment re-runs this test binary with the
// settings a user who followed getting-started has exported, pointing at a
// directory that must stay empty, and requires the in-process tests to pass
// and to leave nothing there. TestMain's isolateEnvironment is what makes
// them pass.
func TestSuiteIgnoresCallerEnvironment(t *testing.T) {
	t.Parallel()
	caller := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), procTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0],
		"-test.run=^("+strings.Join(inProcessTests, "|")+")$", "-test.count=1", "-test.v",
		"-ductile.binary="+ductileBin)
	cmd.Env = append(os.Environ(),
		"DUCTILE_STATE_DIR="+filepath.Join(caller, "state"),
		"DUCTILE_CONFIG="+filepath.Join(caller, "config.yaml"),
		"XDG_STATE_HOME="+filepath.Join(caller, "xdg"),
		"NO_COLOR=1",
	)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, name := range inProcessTests {
		require.Contains(t, string(out), "--- PASS: "+name+" ", "%s did not run", name)
	}
	entries, err := os.ReadDir(caller)
	require.NoError(t, err)
	require.Empty(t, entries, "the tests wrote into the caller's directories")
}
