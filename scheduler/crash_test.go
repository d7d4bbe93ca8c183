package scheduler

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/schedule"
)

// crashChildEnv names the ledger a crash child runs its scheduler on;
// crashKindEnv which schedule it runs.
const (
	crashChildEnv = "DUCTILE_SCHEDULER_CRASH_CHILD"
	crashKindEnv  = "DUCTILE_SCHEDULER_CRASH_KIND"
)

// crashSchedule is the schedule of a crash test: every 1m, or an at:
// one-shot, due at 12:01 (crashNow is 10 seconds later).
func crashSchedule(kind string) schedule.Schedule {
	e := schedule.Entry{ID: kind, Command: "sync", IfRunning: schedule.IfRunningQueue}
	if kind == "at" {
		e.Kind, e.At = schedule.KindAt, crashDue
	} else {
		rule, err := schedule.ParseEvery("1m")
		if err != nil {
			panic(err)
		}
		e.Kind, e.Rule = schedule.KindEvery, rule
	}
	return sched(e)
}

var (
	crashDue = time.Date(2026, 3, 2, 12, 1, 0, 0, time.UTC)
	crashNow = crashDue.Add(10 * time.Second)
)

// crashChild runs a scheduler at crashNow and kills its own process inside
// the transaction recording the first firing, before COMMIT.
func crashChild() {
	l, err := ledger.Open(context.Background(), os.Getenv(crashChildEnv), ledger.Options{
		BeforeCommit: func(appended []ledger.Event) {
			for _, ev := range appended {
				if ev.Type == events.ScheduleFired {
					fmt.Println("fault") // one write, unbuffered
					syscall.Kill(os.Getpid(), syscall.SIGKILL)
					select {}
				}
			}
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	s := New(Options{Ledger: l, Clock: newFakeClock(crashNow), Logger: quiet, Start: crashNow})
	s.Apply([]schedule.Schedule{crashSchedule(os.Getenv(crashKindEnv))})
	s.Start(context.Background())
	select {} // the fault point ends the process
}

// TestCrashBetweenAFiringAndItsJob kills a scheduler inside the transaction
// of its firing: neither the firing nor its job is in the ledger; the
// restarted scheduler fires it once, and an at: one-shot never again.
func TestCrashBetweenAFiringAndItsJob(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	t.Parallel()
	for _, kind := range []string{"every", "at"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "ductile.db")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashChildEnv+"="+path, crashKindEnv+"="+kind)
			out, err := cmd.Output()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "the child ends by its own SIGKILL: %s", out)
			require.Equal(t, "fault\n", string(out))
			require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal())

			// Nothing of the killed transaction is there.
			b := &testBundle{ctx: context.Background(), path: path, start: crashNow}
			b.open(t)
			sc := crashSchedule(kind)
			require.Empty(t, b.records(t, sc))
			last, err := b.l.LastSeq(b.ctx)
			require.NoError(t, err)
			require.Zero(t, last, "no job either")

			// The restarted scheduler fires it once.
			b.restart(t, crashNow.Add(time.Second))
			b.run(t, sc)
			require.Equal(t, []time.Time{crashDue}, b.fired(t, sc))

			// A second restart, later: the every: schedule goes on from
			// there; the one-shot is done.
			b.start = crashNow.Add(5 * time.Minute)
			b.restart(t, b.start)
			b.run(t, sc)
			fired := b.fired(t, sc)
			if kind == "at" {
				require.Equal(t, []time.Time{crashDue}, fired, "a one-shot fires once")
			} else {
				// 12:02 to 12:05 missed (one skipped event), 12:06 on time.
				require.Equal(t, []time.Time{crashDue, crashDue.Add(5 * time.Minute)}, fired)
				require.Len(t, b.records(t, sc), 3)
			}
		})
	}
}
