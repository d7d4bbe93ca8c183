package ledger_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/ledger"
)

const crashChildEnv = "DUCTILE_LEDGER_CRASH_CHILD"

// crashChild appends from 8 goroutines forever, printing "<i> <seq>" for
// every append that returned success. It runs in a child process that the
// test kills with SIGKILL.
func crashChild() {
	l, err := ledger.Open(context.Background(), os.Getenv(crashChildEnv), ledger.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i += 8 {
				seqs, err := l.Append(context.Background(), ledger.NewEvent{
					Stream: fmt.Sprintf("crash/%d", i), Type: "crash.appended", Data: map[string]int{"i": i},
				})
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(4)
				}
				mu.Lock()
				fmt.Fprintf(out, "%d %d\n", i, seqs[0])
				out.Flush() // acknowledged only once written out
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func TestCrashLosesNoAcknowledgedAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ductile.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	// Given a child appending as fast as it can, when it is SIGKILLed
	// mid-stream after at least 2,000 acknowledged appends,
	acked := map[int]int64{}
	sc := bufio.NewScanner(stdout)
	killed := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		require.Len(t, f, 2)
		i, _ := strconv.Atoi(f[0])
		seq, _ := strconv.ParseInt(f[1], 10, 64)
		acked[i] = seq
		if len(acked) >= 2000 && !killed {
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			killed = true // keep reading: lines already written were acknowledged too
		}
	}
	err = cmd.Wait()
	require.Error(t, err, "the child was killed")

	// then on reopen the chain verifies and every acknowledged append is there.
	l, err := ledger.Open(context.Background(), path, ledger.Options{})
	require.NoError(t, err)
	defer l.Close()
	res, err := l.Verify(context.Background(), nil)
	require.NoError(t, err)
	require.True(t, res.OK, res.Problem)
	require.GreaterOrEqual(t, res.Events, int64(len(acked)))
	for i, seq := range acked {
		events, err := l.ReadStream(context.Background(), fmt.Sprintf("crash/%d", i))
		require.NoError(t, err)
		require.Len(t, events, 1, "append %d was acknowledged but is missing", i)
		require.Equal(t, seq, events[0].Seq)
		require.JSONEq(t, fmt.Sprintf(`{"i":%d}`, i), string(events[0].Data))
	}
	t.Logf("killed after %d acknowledged appends; %d events on disk", len(acked), res.Events)
}
