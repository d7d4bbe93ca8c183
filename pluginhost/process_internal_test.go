//go:build linux

package pluginhost

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readStat reads /proc/<pid>/stat with raw system calls and its own field
// splitting: it must find what a plain read and strings.Fields find, even
// for a command name made to look like more fields.
func TestReadStatAsProcReads(t *testing.T) {
	t.Parallel()
	link := filepath.Join(t.TempDir(), "a) 1 2 (b")
	require.NoError(t, os.Symlink("/bin/sleep", link))
	cmd := exec.Command(link, "1000")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for _, pid := range []int{os.Getpid(), cmd.Process.Pid} {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		require.NoError(t, err)
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		pgrp, err := strconv.Atoi(f[2])
		require.NoError(t, err)
		start, err := strconv.ParseUint(f[19], 10, 64)
		require.NoError(t, err)

		st, err := readStat(pid)
		require.NoError(t, err)
		require.Equal(t, pgrp, st.pgrp, s)
		require.Equal(t, start, st.startTicks, s)
		require.Contains(t, "RSDZTtWXIPK", string(st.state), s) // it may change between the reads
	}
	_, err := readStat(1 << 30)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func BenchmarkProcessOf(b *testing.B) {
	cmd := exec.Command("/bin/sleep", "1000")
	require.NoError(b, cmd.Start())
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ProcessOf(cmd.Process.Pid); err != nil {
			b.Fatal(err)
		}
	}
}
