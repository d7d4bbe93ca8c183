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

const (
	crashChildEnv = "DUCTILE_LEDGER_CRASH_CHILD"
	// faultAtEnv makes the crash child kill itself at a fault point instead:
	// inside the first append transaction that reaches this seq, before COMMIT.
	faultAtEnv = "DUCTILE_LEDGER_CRASH_FAULT_AT"
)

// crashChild appends from 8 goroutines forever, printing "<i> <seq>" for
// every append that returned success (the seq of its last event). It runs
// in a child process that the test kills with SIGKILL, or that kills itself
// with SIGKILL at the fault point faultAtEnv names, after printing "fault
// <first seq> <last seq>" of the transaction it kills. In that mode each
// append is three events on one stream.
func crashChild() {
	opts := ledger.Options{}
	perAppend := 1
	if at, err := strconv.ParseInt(os.Getenv(faultAtEnv), 10, 64); err == nil {
		perAppend = 3
		opts.BeforeCommit = func(appended []ledger.Event) {
			first, last := appended[0].Seq, appended[len(appended)-1].Seq
			if last < at {
				return
			}
			fmt.Fprintf(os.Stdout, "fault %d %d\n", first, last) // one write, unbuffered
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal ends the process; nothing commits meanwhile
		}
	}
	l, err := ledger.Open(context.Background(), os.Getenv(crashChildEnv), opts)
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
				evs := make([]ledger.NewEvent, perAppend)
				for j := range evs {
					evs[j] = ledger.NewEvent{Stream: fmt.Sprintf("crash/%d", i), ExpectedVersion: int64(j), Type: "crash.appended", Data: map[string]int{"i": i}}
				}
				seqs, err := l.Append(context.Background(), evs...)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(4)
				}
				mu.Lock()
				fmt.Fprintf(out, "%d %d\n", i, seqs[len(seqs)-1])
				out.Flush() // acknowledged only once written out
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// crashRun is what a crash child printed before it died.
type crashRun struct {
	acked       map[int]int64 // append i → the seq of its last event
	fault       bool          // it reached the fault point
	first, last int64         // the seqs of the transaction the fault killed
}

// runCrashChild starts a crash child on path with the extra environment,
// reads what it acknowledges, SIGKILLs it once it has acknowledged killAt
// appends (0: never; it must kill itself), and returns once it has died.
func runCrashChild(t *testing.T, path string, killAt int, env ...string) crashRun {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), crashChildEnv+"="+path), env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	run := crashRun{acked: map[int]int64{}}
	sc := bufio.NewScanner(stdout)
	killed := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if f[0] == "fault" {
			require.Len(t, f, 3)
			run.fault = true
			run.first, _ = strconv.ParseInt(f[1], 10, 64)
			run.last, _ = strconv.ParseInt(f[2], 10, 64)
			continue
		}
		require.Len(t, f, 2)
		i, _ := strconv.Atoi(f[0])
		seq, _ := strconv.ParseInt(f[1], 10, 64)
		run.acked[i] = seq
		if killAt > 0 && len(run.acked) >= killAt && !killed {
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			killed = true // keep reading: lines already written were acknowledged too
		}
	}
	err = cmd.Wait()
	require.Error(t, err, "the child was killed")
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the child died of SIGKILL, not: %v", err)
	return run
}

// requireAcknowledgedOnDisk reopens the ledger at path, verifies its chain
// and requires every acknowledged append to be there, whole.
func requireAcknowledgedOnDisk(t *testing.T, path string, acked map[int]int64, perAppend int) (*ledger.Ledger, ledger.VerifyResult) {
	t.Helper()
	l, err := ledger.Open(context.Background(), path, ledger.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	res, err := l.Verify(context.Background(), nil)
	require.NoError(t, err)
	require.True(t, res.OK, res.Problem)
	require.GreaterOrEqual(t, res.Events, int64(len(acked)*perAppend))
	for i, seq := range acked {
		events, err := l.ReadStream(context.Background(), fmt.Sprintf("crash/%d", i))
		require.NoError(t, err)
		require.Len(t, events, perAppend, "append %d was acknowledged but is missing", i)
		require.Equal(t, seq, events[perAppend-1].Seq)
		require.JSONEq(t, fmt.Sprintf(`{"i":%d}`, i), string(events[0].Data))
	}
	return l, res
}

// TestCrashLosesNoAcknowledgedAppend proves that an acknowledged append
// survives a process kill (SIGKILL), and that the chain verifies after it.
// It does not prove durability against a power cut: the kernel keeps the
// WAL pages a killed process wrote, so this test passes just the same with
// every append relaxed and synchronous=NORMAL, i.e. with no fsync at all.
// The fsync-before-answer order is proven by TestDurableAnswerWaitsForItsFsync
// and TestEveryDurableAnswerFollowsACoveringFsync (syncorder_internal_test.go).
func TestCrashLosesNoAcknowledgedAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ductile.db")

	// Given a child appending as fast as it can, when it is SIGKILLed
	// mid-stream after at least 2,000 acknowledged appends,
	run := runCrashChild(t, path, 2000)

	// then on reopen the chain verifies and every acknowledged append is there.
	_, res := requireAcknowledgedOnDisk(t, path, run.acked, 1)
	t.Logf("killed after %d acknowledged appends; %d events on disk", len(run.acked), res.Events)
}

// TestKillBeforeCommitLeavesNoneOfTheTransaction kills the appending
// process at the ledger's fault point, inside an append transaction whose
// events are inserted and projected but not committed: none of that
// transaction is in the file afterwards, everything acknowledged before is,
// and the chain verifies. It is what makes Options.BeforeCommit a fault
// point the daemon's crash tests can rely on.
func TestKillBeforeCommitLeavesNoneOfTheTransaction(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ductile.db")

	// Given a child appending three events at a time from 8 goroutines,
	// when it kills itself in the transaction that reaches seq 3,000,
	run := runCrashChild(t, path, 0, faultAtEnv+"=3000")
	require.True(t, run.fault, "the child reached the fault point")
	require.GreaterOrEqual(t, run.last, int64(3000))
	require.GreaterOrEqual(t, run.last-run.first, int64(2), "a transaction of at least one append")

	// then every acknowledged append is there, and nothing of the killed
	// transaction is.
	l, res := requireAcknowledgedOnDisk(t, path, run.acked, 3)
	last, err := l.LastSeq(context.Background())
	require.NoError(t, err)
	require.Equal(t, run.first-1, last, "the log ends right before the transaction the fault killed")
	require.Equal(t, last, res.Events)
	t.Logf("killed in the transaction of seqs %d..%d, after %d acknowledged appends", run.first, run.last, len(run.acked))
}
