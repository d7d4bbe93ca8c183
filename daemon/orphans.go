package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/queries"
)

// orphanGrace bounds how long recovery waits for an orphaned plugin's
// process group to die after SIGKILL (a process in uninterruptible sleep,
// on a hung NFS mount, dies only when its system call returns).
const orphanGrace = 10 * time.Second

// recoverOrphans re-queues (or buries) jobs left running by a process that
// died (spec §11.2). It runs while we hold the lock, before dispatching, so
// nothing else can be running them.
func (c *Core) recoverOrphans(ctx context.Context) error {
	var ids []string
	err := c.Ledger.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.ListActiveJobs(conn, func(r queries.ListActiveJobsRow) error {
			ids = append(ids, r.ID)
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("find orphaned jobs: %w", err)
	}
	for _, id := range ids {
		// Its plugin first: the job must not run again beside it.
		ended, err := c.endOrphanPlugin(ctx, id)
		if err != nil {
			c.log.Error("could not end the plugin of a job left running by a stopped process; it may run twice at once", "job_id", id, "err", err)
		}
		reason := ""
		if ended != "" {
			reason = commands.OrphanReason + "; " + ended
		}
		// A job a remote worker's lease holds keeps running there: its
		// completion applies, or the sweeper ends it when the lease runs out.
		res, err := commands.RecoverJob(ctx, c.Ledger, commands.Recover{JobID: id, Reason: reason, Now: time.Now(), Pipelines: c.Engine().PipelineRuntime(),
			SkipLeased: true})
		if err != nil {
			return err
		}
		if res.Recovered {
			c.log.Warn("recovered a job left running by a stopped process", "job_id", id,
				"attempt", res.Attempt, "next_attempt", res.NextAttempt, "status", res.Status)
		}
	}
	if len(ids) > 0 {
		if _, err := c.Projector.CatchUp(ctx); err != nil {
			return err
		}
	}
	return nil
}

// endOrphanPlugin ends the plugin process group of job id's running
// attempt, should it still run (the process running the job died before
// it), so that the job never runs twice at once: its job.started records
// the group, and pluginhost.EndProcessGroup ends it only if its leader is
// still that process. It returns what the job's recovery records of it:
// "" when there was nothing to end.
func (c *Core) endOrphanPlugin(ctx context.Context, id string) (string, error) {
	evs, err := c.Ledger.ReadStream(ctx, events.JobStream(id))
	if err != nil {
		return "", err
	}
	j, err := commands.FoldJob(evs)
	if err != nil {
		return "", err
	}
	if j.Leased() != nil {
		return "", nil // a remote worker runs it: nothing of it runs here
	}
	var plugin *events.PluginProcess
	for _, ev := range evs {
		if ev.Type != events.JobStarted {
			continue
		}
		var st events.Started
		if err := json.Unmarshal(ev.Data, &st); err != nil {
			return "", fmt.Errorf("job %s: event %d: %w", id, ev.Seq, err)
		}
		if st.Attempt == j.Attempt {
			plugin = st.Plugin
		}
	}
	if plugin == nil {
		return "", nil // no process, or started before they were recorded
	}
	ctx, cancel := context.WithTimeout(ctx, orphanGrace)
	defer cancel()
	found, err := pluginhost.EndProcessGroup(ctx, *plugin)
	if err != nil {
		return "", fmt.Errorf("job %s: its plugin (process group %d) still runs: %w", id, plugin.PGID, err)
	}
	if !found {
		return "", nil
	}
	c.log.Warn("ended the plugin process group of a job left running by a stopped process", "job_id", id,
		"attempt", j.Attempt, "pgid", plugin.PGID)
	return fmt.Sprintf("its plugin (process group %d) was killed", plugin.PGID), nil
}
