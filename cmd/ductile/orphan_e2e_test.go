package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// alive reports whether process pid runs (exists, and is not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// stubbornPIDs waits for the stubborn fixture to write "<its pid> <its
// child's pid>" to dir/pids, and returns them.
func stubbornPIDs(t *testing.T, dir string) (leader, child int) {
	t.Helper()
	var fields []string
	waitFor(t, waitTimeout, "the plugin's pids", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "pids"))
		fields = strings.Fields(string(b))
		return err == nil && len(fields) == 2
	})
	leader, err := strconv.Atoi(fields[0])
	require.NoError(t, err)
	child, err = strconv.Atoi(fields[1])
	require.NoError(t, err)
	return leader, child
}

// TestRecoveryEndsThePluginOfAKilledDaemon: a plugin that outlives its
// daemon (SIGKILL: nothing of the daemon runs to stop it) is ended, its
// whole process group, by the recovery of the next start, before its job
// runs again; so a job never runs twice at once (issue 20, item 22).
func TestRecoveryEndsThePluginOfAKilledDaemon(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, "plugin_roots: [$PLUGINS]\nplugins:\n  stubborn:\n    retry: {max_attempts: 2}\n    config: {dir: $SCRATCH}\n")
	// Whatever group the fixture last wrote down is ended at the end, even
	// if the test fails first.
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(w.scratch, "pids")); err == nil {
			if f := strings.Fields(string(b)); len(f) == 2 {
				if pid, err := strconv.Atoi(f[0]); err == nil {
					_ = syscall.Kill(-pid, syscall.SIGKILL)
				}
			}
		}
	})
	d := w.startDaemon()
	var run runView
	w.runJSON(0, &run, "plugin", "run", "stubborn", "--json")
	leader, child := stubbornPIDs(t, w.scratch)
	t.Cleanup(func() { _ = syscall.Kill(-leader, syscall.SIGKILL) })

	require.NoError(t, d.cmd.Process.Signal(syscall.SIGKILL))
	require.Equal(t, -1, d.wait(t), "killed")
	require.True(t, alive(leader) && alive(child), "the plugin outlives the daemon (a SIGKILL cannot be handled)")
	require.NoError(t, os.Remove(filepath.Join(w.scratch, "pids")))

	// The next start recovers the job: its plugin group is ended first.
	d = w.startDaemon()
	defer func() { d.kill() }()
	require.False(t, alive(leader), "the plugin's process was ended by the recovery")
	require.False(t, alive(child), "and every process of its group")

	// Then the job runs again, alone.
	again, againChild := stubbornPIDs(t, w.scratch)
	require.NotEqual(t, leader, again)
	require.True(t, alive(again) && alive(againChild))
	in := w.inspect(run.JobID)
	var recovered struct {
		Reason string `json:"reason"`
	}
	for _, ev := range in.Events {
		if ev.Type == "job.recovered" {
			require.NoError(t, json.Unmarshal(ev.Data, &recovered))
		}
	}
	require.Contains(t, recovered.Reason, "its plugin (process group "+strconv.Itoa(leader)+") was killed")
}
