package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

func systemSchedulerCommand() *cli.Command {
	return &cli.Command{
		Name:  "scheduler",
		Usage: "show every schedule: its last firing, its next run and why, and what would hold it back",
		Description: "Reads each schedule's stream (schedule/<plugin>/<id>) from the ledger and plans its\n" +
			"next firing as the daemon does: the reasons for its time (window, jitter, not_on), and\n" +
			"what if_running, the poll guard and the circuit breaker would do with a firing due now.\n" +
			"The schedules are those the running daemon applied (config.applied); with no daemon\n" +
			"running, those of the config file this command loads.",
		Flags:  []cli.Flag{jsonFlag()},
		Action: withReadLedger(systemScheduler),
	}
}

func systemScheduler(c *cli.Context, e *env, l *ledger.Ledger) error {
	side, err := readDaemonSide(c.Context, e, l)
	if err != nil {
		return err
	}
	now := time.Now()
	vs, err := views.ReadSchedules(c.Context, l, side.schedules(), now)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(e.stdout, map[string]any{"now": now.UTC(), "daemon": side.status, "schedules": vs})
	}
	if !side.status.Running {
		fmt.Fprintln(e.stdout, "no daemon is running: nothing fires; the schedules of the config file:")
	}
	if len(vs) == 0 {
		fmt.Fprintln(e.stdout, "no schedules (plugins.<name>.schedules of enabled plugins)")
		return nil
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SCHEDULE\tWHEN\tLAST FIRED\tNEXT\tIF DUE NOW")
	for _, v := range vs {
		last := "never"
		if v.LastFired != nil {
			last = v.LastFired.Slot.Due.Local().Format("2006-01-02 15:04:05 MST") + " (" + views.ShortID(v.LastFired.JobID) + ")"
		}
		next := v.Done
		if v.Next != nil {
			next = v.Next.Due.Local().Format("2006-01-02 15:04:05 MST")
		}
		would := string(v.Would.Action)
		if v.Would.Action == "skip" {
			would += ": " + v.Would.Reason
		}
		fmt.Fprintf(w, "%s/%s\t%s\t%s\t%s\t%s\n", v.Plugin, v.ID, v.When, last, next, would)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, v := range vs {
		var why []string
		if v.Next != nil {
			why = v.Next.Why
		}
		if v.LastSkipped != nil {
			why = append(why, "last skipped: "+v.LastSkipped.Reason)
		}
		if note := v.BreakerNote(); note != "" {
			why = append(why, note)
		}
		if len(why) > 0 {
			fmt.Fprintf(e.stdout, "%s/%s: %s\n", v.Plugin, v.ID, strings.Join(why, "; "))
		}
	}
	return nil
}
