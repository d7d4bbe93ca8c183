package daemon

import (
	"context"
	"os"
	"time"

	"github.com/ductile/ductile/dispatch"
	"github.com/ductile/ductile/metrics"
)

// startServices starts the daemon's long-running services on its Core, with
// the config applied: metrics, log retention, the scheduler, the HTTP API and
// the webhook listener; writes the report system status reads; logs that the
// daemon started; and last starts the dispatcher, so no job runs before that
// line (work that arrives meanwhile waits in the queue).
func (d *Daemon) startServices(ctx context.Context, opts Options) error {
	log, e := d.logger, d.Engine()
	d.Metrics = metrics.New(metrics.Options{Ledger: d.Ledger, Projector: d.Projector, Logger: log})
	d.Dispatcher = dispatch.New(dispatch.Options{
		Engine: e, Projector: d.Projector, Logger: log,
		MaxWorkers: opts.MaxWorkers, Grace: opts.Grace, DrainTimeout: opts.DrainTimeout, Observer: d.Metrics,
	})
	d.retention = &retention{ledger: d.Ledger, projector: d.Projector, log: d.log,
		keep: func() time.Duration { return d.Config().Service.JobLogRetention }}
	d.retention.start(ctx)
	d.sweeper = startSweeper(ctx, d.Core, log)
	d.startScheduler(ctx, log)
	if err := d.startAPI(opts.API); err != nil {
		return err
	}
	if err := d.startWebhooks(e.Config(), opts.Secrets, log); err != nil {
		return err
	}
	report, err := openReport(d.StateDir)
	if err != nil {
		return err
	}
	d.report.Store(report)
	report.update(d)
	// Said once every door is open and before the first job starts, so the
	// line comes before any job's in the log.
	d.log.Info("ductile started", "state_dir", opts.StateDir, "pid", os.Getpid(),
		"head", d.Ledger.Head(), "plugins", len(d.Plugins().List()), "max_workers", d.Config().Service.MaxWorkers)
	d.Dispatcher.Start(ctx)
	return nil
}

// stopServices stops what startServices started, the front doors first
// (requests in flight finish while the ledger is open), and drains the
// dispatcher last.
func (d *Daemon) stopServices() []error {
	errs := []error{d.stopAPI()}
	if d.Webhooks != nil {
		errs = append(errs, d.Webhooks.Close())
	}
	if d.Scheduler != nil {
		d.Scheduler.Stop()
	}
	if d.retention != nil {
		d.retention.stop()
	}
	if d.sweeper != nil {
		d.sweeper.stop()
	}
	if d.Dispatcher != nil {
		d.Dispatcher.Stop()
	}
	return errs
}
