package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/stream"
	"github.com/ductile/ductile/views"
)

// barWidth is how many cells run watch's progress bar has.
const barWidth = 30

// runWatch follows a plugin run until it ends (stream.FollowRuns, as GET
// /runs/stream?run_id= does): on a terminal a progress bar with the stage
// and message, redrawn in place; otherwise one line per change; with
// --json one RunDelta per line. Exit 0 when the run succeeded, 1 when it
// ended otherwise.
func runWatch(c *cli.Context, e *env, l *ledger.Ledger) error {
	ctx := c.Context
	id, err := views.ResolveJobID(ctx, l, c.Args().First())
	if err != nil {
		return runError(err)
	}
	rec, err := views.ReadRunRecord(ctx, l, id)
	if err != nil {
		return runError(err)
	}
	draw := watchDrawer(e, c.Bool("json"))
	now := views.RunDelta{Op: views.RunChanged, RunID: id, Status: rec.Status, Progress: rec.Progress, UpdatedAt: rec.UpdatedAt, Seq: rec.Seq}
	if err := draw(now, rec); err != nil {
		return err
	}
	if !rec.Status.Terminal() {
		err = stream.FollowRuns(ctx, l, stream.RunQuery{After: rec.Seq, RunID: id}, func(m stream.Message) error {
			d, _ := m.Data.(views.RunDelta)
			// The delta has the status and progress; the stage and message
			// are the record's now.
			now, err := views.ReadRunRecord(ctx, l, id)
			if err != nil {
				return err
			}
			return draw(d, now)
		})
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return errorf(classify(err), "stopped watching run %s; it goes on (see: ductile run get %s)", id, id)
			}
			return err
		}
		if rec, err = views.ReadRunRecord(context.WithoutCancel(ctx), l, id); err != nil {
			return err
		}
	}
	if !c.Bool("json") {
		fmt.Fprintf(e.stdout, "run %s %s", id, rec.Status)
		if rec.Error != nil {
			fmt.Fprintf(e.stdout, ": %s: %s", rec.Error.Code, oneLine(rec.Error.Message, 200))
		}
		fmt.Fprintln(e.stdout)
		if rec.ExportsCount > 0 {
			fmt.Fprintf(e.stdout, "%d export items: ductile run export %s\n", rec.ExportsCount, views.ShortID(id))
		}
	}
	if rec.Status != views.RunSucceeded {
		return silent(exitFailure)
	}
	return nil
}

// watchDrawer returns what run watch does with each change: a JSON line
// (the delta, as GET /runs/stream sends it), a redrawn bar on a terminal,
// or a line of text; rec is the run now, for its stage and message.
func watchDrawer(e *env, asJSON bool) func(d views.RunDelta, rec views.RunRecord) error {
	if asJSON {
		return func(d views.RunDelta, _ views.RunRecord) error { return printJSONLine(e, d) }
	}
	if !daemon.IsTerminal(e.stdout) {
		return func(d views.RunDelta, rec views.RunRecord) error {
			line := strings.TrimSpace(fmt.Sprintf("%s %-16s %s", epochText(d.UpdatedAt), d.Status, progressText(d.Progress, rec.Stage, rec.Message)))
			_, err := fmt.Fprintln(e.stdout, line)
			return err
		}
	}
	return func(d views.RunDelta, rec views.RunRecord) error {
		line := progressBar(d.Progress) + " " + string(d.Status)
		if text := progressText(nil, rec.Stage, rec.Message); text != "" {
			line += " " + shorten(text, 80) // one line of a terminal, redrawn in place
		}
		end := ""
		if d.Status.Terminal() {
			end = "\n" // the last draw stays on the screen
		}
		_, err := fmt.Fprintf(e.stdout, "\r\033[K%s%s", line, end)
		return err
	}
}

// progressBar draws progress (nil: not reported) as a bar and a percentage.
func progressBar(progress *float64) string {
	if progress == nil {
		return "[" + strings.Repeat("·", barWidth) + "]   ?%"
	}
	p := min(max(*progress, 0), 1)
	done := int(p * barWidth)
	return fmt.Sprintf("[%s%s] %3.0f%%", strings.Repeat("#", done), strings.Repeat("·", barWidth-done), p*100)
}

// shorten is s on one line, cut to n characters (not bytes: a cut never
// splits a character) with an ellipsis.
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
