package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

func jobTreeCommand() *cli.Command {
	return &cli.Command{
		Name:      "tree",
		Usage:     "show a job's whole tree (its root and every job routed from it), now or at a past moment",
		ArgsUsage: "JOB_ID",
		Description: "Without --at, the tree as the job table holds it now (the JSON of GET /job/{id}/tree).\n" +
			"With --at SEQ or --at RFC3339 (e.g. 2026-03-01T12:00:00Z), the tree as it was then: every job\n" +
			"enqueued by that moment, with the status, attempt and baggage (context) its events up to it\n" +
			"give. A time stands for the last event recorded at or before it.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "at", Usage: "show the tree as it was at `SEQ|RFC3339`"},
			&cli.IntFlag{Name: "limit", Value: 1000, Usage: "at most `N` jobs, those nearest the root"},
			jsonFlag(),
		},
		Action: withReadLedger(jobTree),
	}
}

// jobTreeOutput is what job tree prints with --json: GET /job/{id}/tree's body.
type jobTreeOutput struct {
	JobID string `json:"job_id"`
	views.JobTreeAt
}

func jobTree(c *cli.Context, e *env, l *ledger.Ledger) error {
	ctx := c.Context
	if c.Int("limit") < 1 {
		return usagef("--limit must be 1 or more, not %d", c.Int("limit"))
	}
	id, err := views.ResolveJobID(ctx, l, c.Args().First())
	if err != nil {
		return jobError(err)
	}
	out := jobTreeOutput{JobID: id}
	if at := c.String("at"); c.IsSet("at") {
		cut, err := views.ParseCut(at)
		if err != nil {
			return usagef("--at: %v", err)
		}
		out.JobTreeAt, err = views.ReadJobTreeAt(ctx, l, id, cut, c.Int("limit"))
		if err != nil {
			return treeAtError(err)
		}
	} else {
		tree, err := views.ReadJobTree(ctx, l, id, c.Int("limit"))
		if err != nil {
			return jobError(err)
		}
		out.JobTreeAt = views.TreeNow(tree)
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	printJobTree(e, out)
	return nil
}

// treeAtError turns ReadJobTreeAt's refusals into the CLI's errors.
func treeAtError(err error) error {
	var archived *views.ArchivedError
	var notYet *views.NotYetError
	switch {
	case errors.As(err, &archived):
		return withHint(errcode.Archived, archived, fmt.Sprintf("pick a later moment (after seq %d); see: ductile ledger archive --help", archived.Through))
	case errors.As(err, &notYet):
		return withHint(errcode.NotFound, notYet, fmt.Sprintf("pick a moment at or after seq %d: ductile job tree %s --at %d", notYet.RootSeq, notYet.JobID, notYet.RootSeq))
	}
	return jobError(err)
}

// printJobTree prints a tree indented by depth, children under parents.
func printJobTree(e *env, out jobTreeOutput) {
	w := e.stdout
	if out.AtSeq > 0 {
		fmt.Fprintf(w, "tree of job %s at seq %d (%s)\n", out.JobID, out.AtSeq, out.At)
	}
	children := map[string][]views.JobAt{}
	for _, j := range out.Jobs {
		if j.ParentJobID != nil && j.ID != out.Root {
			children[*j.ParentJobID] = append(children[*j.ParentJobID], j)
		}
	}
	if out.AncestorsArchived {
		fmt.Fprintf(w, "(the ancestors of %s were archived: the tree starts at the nearest job still in the ledger)\n", out.Root)
	}
	var walk func(j views.JobAt, depth int)
	walk = func(j views.JobAt, depth int) {
		mark := " "
		if j.ID == out.JobID {
			mark = "*"
		}
		fmt.Fprintf(w, "%s%s%s  %s %s  %s (attempt %d/%d)", mark, strings.Repeat("  ", depth), views.ShortID(j.ID), j.Plugin, j.Command, j.Status, j.Attempt, j.MaxAttempts)
		if j.ReplayOf != "" {
			fmt.Fprintf(w, "  replay of %s", views.ShortID(j.ReplayOf))
		}
		if j.RetryOf != "" {
			fmt.Fprintf(w, "  retry of %s", views.ShortID(j.RetryOf))
		}
		if len(j.Context) > 0 && string(j.Context) != "{}" {
			fmt.Fprintf(w, "  context %s", oneLine(string(j.Context), 100))
		}
		fmt.Fprintln(w)
		for _, ch := range children[j.ID] {
			walk(ch, depth+1)
		}
	}
	for _, j := range out.Jobs {
		if j.ID == out.Root {
			walk(j, 0)
		}
	}
	if out.Truncated {
		fmt.Fprintf(w, "… and more (see: --limit)\n")
	}
}

func jobReplayCommand() *cli.Command {
	return &cli.Command{
		Name:      "replay",
		Usage:     "run a finished job's step again, as a new job linked to it",
		ArgsUsage: "JOB_ID",
		Description: "Enqueues a new job with the old one's plugin, command, payload, event and context (baggage),\n" +
			"in the old one's tree (the same parent), with the attempt budget the config gives the plugin now.\n" +
			"It runs that one step only: no pipeline step follows it. The new job records which job it\n" +
			"replays (replay_of) and the old one which jobs replay it (job.replayed). Works on a succeeded,\n" +
			"dead or canceled job, any number of times; refused (exit 1) for a queued or running one.",
		Flags:  []cli.Flag{jsonFlag(), dryRunFlag()},
		Action: withExistingLedger(jobReplay),
	}
}

// replayOutput is what job replay prints with --json.
type replayOutput struct {
	JobID    string `json:"job_id,omitempty"` // the new job
	ReplayOf string `json:"replay_of"`
	Plugin   string `json:"plugin"`
	Command  string `json:"command"`
	Status   string `json:"status"` // queued | would enqueue
	RanBy    string `json:"ran_by"` // daemon | none (no daemon is running)
	DryRun   bool   `json:"dry_run,omitempty"`
}

func jobReplay(c *cli.Context, e *env, l *ledger.Ledger) error {
	ctx := c.Context
	eng, err := currentEngine(ctx, e, l)
	if err != nil {
		return err
	}
	res, err := eng.Replay(ctx, engine.Redo{Job: c.Args().First(), By: events.ActorCLI, Check: true, DryRun: c.Bool("dry-run")})
	j := res.Old
	switch {
	case j != nil && errors.Is(err, commands.ErrInvalidTransition):
		return replayRefused(j)
	case err != nil:
		return jobError(eng.refused(err, false))
	}
	out := replayOutput{ReplayOf: j.JobID, Plugin: j.Plugin, Command: j.Command, RanBy: eng.ranBy()}
	if c.Bool("dry-run") {
		out.Status, out.DryRun = "would enqueue", true
		if c.Bool("json") {
			return printJSON(e.stdout, out)
		}
		fmt.Fprintf(e.stdout, "would replay job %s (%s, %s %s) as a new job; %s (run without --dry-run to do it)\n",
			j.JobID, j.Status, j.Plugin, j.Command, eng.whoRuns())
		return nil
	}
	out.JobID, out.Status = res.JobID, string(events.StatusQueued)
	// So that job list and queue show the new job at once.
	if err := daemon.CatchUpUnlessHeld(ctx, e.stateDir, l, e.quietLogger()); err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	fmt.Fprintf(e.stdout, "replayed job %s as job %s (%s %s); %s\n", j.JobID, res.JobID, j.Plugin, j.Command, eng.whoRuns())
	fmt.Fprintf(e.stdout, "follow it with: ductile job inspect %s\n", res.JobID)
	return nil
}

// replayRefused explains why job j cannot be replayed yet.
func replayRefused(j *commands.Job) error {
	return hintf(errcode.Conflict, "wait for it to finish, or stop it first: ductile job cancel "+j.JobID,
		"job %s is %s: only a finished (succeeded, dead or canceled) job can be replayed", j.JobID, j.Status)
}

// printBaggage prints job inspect -v's baggage: the job's context, its
// parent's, and the paths this step added.
func printBaggage(e *env, b views.Baggage) {
	w := e.stdout
	fmt.Fprintf(w, "baggage:\n")
	fmt.Fprintf(w, "  context         %s\n", b.Context)
	fmt.Fprintf(w, "  parent context  %s\n", b.ParentContext)
	if len(b.AddedPaths) == 0 {
		fmt.Fprintf(w, "  added           (nothing)\n")
		return
	}
	fmt.Fprintf(w, "  added           %s\n", strings.Join(b.AddedPaths, ", "))
}
