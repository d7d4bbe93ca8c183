package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ductile/ductile/dispatch"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/views"
)

// Options configure Metrics.
type Options struct {
	Ledger    *ledger.Ledger
	Projector *projections.Projector // nil: the lag is read from the stored checkpoint
	Logger    *slog.Logger
	// ScrapeTimeout bounds the reads of a scrape (default 5s).
	ScrapeTimeout time.Duration
}

// Metrics is a registry of Ductile's metrics; it is the dispatcher's
// Observer.
type Metrics struct {
	registry *prometheus.Registry
	log      *slog.Logger
	attempts *prometheus.HistogramVec
	spawns   *prometheus.CounterVec
	workers  workerSeries
	topics   topicSeries
}

var _ dispatch.Observer = (*Metrics)(nil)

// New registers the metrics of opts.Ledger (and the Go runtime's and the
// process's).
func New(opts Options) *Metrics {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ScrapeTimeout <= 0 {
		opts.ScrapeTimeout = 5 * time.Second
	}
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		log:      opts.Logger.With("component", "metrics"),
		attempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "ductile_attempt_duration_seconds",
			Help: "How long the attempts that ended in this process took, by plugin, command and outcome.",
			// 5 ms to about 10 min.
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 10),
		}, []string{"plugin", "command", "outcome"}),
		spawns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ductile_spawn_failures_total",
			Help: "Plugin processes that could not be started, by plugin.",
		}, []string{"plugin"}),
		workers: newWorkerSeries(),
		topics:  newTopicSeries(),
	}
	m.registry.MustRegister(m.workers.collectors()...)
	m.registry.MustRegister(m.topics.collectors()...)
	m.registry.MustRegister(m.attempts, m.spawns,
		&ledgerCollector{l: opts.Ledger, p: opts.Projector, timeout: opts.ScrapeTimeout},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format. A read that
// fails leaves its metrics out, the others are served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
	})
}

// Registry is where the metrics are registered (another part may add its own).
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// AttemptEnded observes an attempt's duration.
func (m *Metrics) AttemptEnded(plugin, command string, outcome events.Outcome, d time.Duration) {
	m.attempts.WithLabelValues(plugin, command, string(outcome)).Observe(d.Seconds())
}

// SpawnFailed counts a plugin process that could not be started.
func (m *Metrics) SpawnFailed(plugin string) { m.spawns.WithLabelValues(plugin).Inc() }

// ledgerCollector reads the projections and the ledger at scrape time.
type ledgerCollector struct {
	l       *ledger.Ledger
	p       *projections.Projector
	timeout time.Duration
}

var (
	jobsDesc = prometheus.NewDesc("ductile_jobs",
		"Jobs by plugin and status, for the statuses an index holds (queued, running, cancel_requested, dead, canceled; succeeded jobs are not counted: see ductile_jobs_finished_total).",
		[]string{"plugin", "status"}, nil)
	finishedDesc = prometheus.NewDesc("ductile_jobs_finished_total",
		"Jobs that reached a terminal status (succeeded, dead, canceled) by plugin, over the ledger's life, archived jobs included.",
		[]string{"plugin", "status"}, nil)
	queueDesc = prometheus.NewDesc("ductile_queue_depth",
		"Jobs in the queue by status (queued, running, cancel_requested).", []string{"status"}, nil)
	lagDesc = prometheus.NewDesc("ductile_projector_lag_events",
		"Events appended to the ledger that the projections have not applied yet.", nil, nil)
	headDesc = prometheus.NewDesc("ductile_ledger_head_seq",
		"The seq of the ledger's last event.", nil, nil)
	bytesDesc = prometheus.NewDesc("ductile_ledger_bytes",
		"Size of the ledger's files: the database and its write-ahead log.", []string{"file"}, nil)
	commitsDesc = prometheus.NewDesc("ductile_ledger_commits_total",
		"Append transactions this process committed to the ledger.", nil, nil)
	fsyncsDesc = prometheus.NewDesc("ductile_ledger_fsyncs_total",
		"Fsyncs of the ledger's write-ahead log by this process.", nil, nil)
)

func (c *ledgerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{jobsDesc, finishedDesc, queueDesc, lagDesc, headDesc, bytesDesc, commitsDesc, fsyncsDesc,
		workerLeasesDesc, workerLastSeenDesc, workerPluginsDesc, topicBacklogDesc, topicClaimsActiveDesc} {
		ch <- d
	}
}

func (c *ledgerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()

	if counts, err := views.CountJobs(ctx, c.l); err != nil {
		ch <- prometheus.NewInvalidMetric(jobsDesc, err)
	} else {
		queue := map[events.Status]int64{events.StatusQueued: 0, events.StatusRunning: 0, events.StatusCancelRequested: 0}
		for _, n := range counts {
			ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(n.Jobs), n.Plugin, string(n.Status))
			if _, ok := queue[n.Status]; ok {
				queue[n.Status] += n.Jobs
			}
		}
		for status, n := range queue {
			ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(n), string(status))
		}
	}

	if totals, err := views.JobTotals(ctx, c.l); err != nil {
		ch <- prometheus.NewInvalidMetric(finishedDesc, err)
	} else {
		for _, n := range totals {
			ch <- prometheus.MustNewConstMetric(finishedDesc, prometheus.CounterValue, float64(n.Jobs), n.Plugin, string(n.Status))
		}
	}

	if lag, err := c.lag(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(lagDesc, err)
	} else {
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(max(lag.Events, 0)))
		ch <- prometheus.MustNewConstMetric(headDesc, prometheus.GaugeValue, float64(lag.Head))
	}

	collectWorkers(ctx, c.l, ch)
	collectTopics(ctx, c.l, time.Now(), ch)

	ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.GaugeValue, float64(fileSize(c.l.Path())), "database")
	ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.GaugeValue, float64(fileSize(c.l.Path()+"-wal")), "wal")
	ws := c.l.WriteStats()
	ch <- prometheus.MustNewConstMetric(commitsDesc, prometheus.CounterValue, float64(ws.Commits))
	ch <- prometheus.MustNewConstMetric(fsyncsDesc, prometheus.CounterValue, float64(ws.Syncs))
}

// lag is the projector's lag, or the stored checkpoint's without one.
func (c *ledgerCollector) lag(ctx context.Context) (projections.Lag, error) {
	if c.p != nil {
		return c.p.Lag(ctx)
	}
	head, err := c.l.LastSeq(ctx)
	if err != nil {
		return projections.Lag{}, err
	}
	cp, err := projections.ReadCheckpoint(ctx, c.l)
	if err != nil {
		return projections.Lag{}, err
	}
	return projections.Lag{Checkpoint: cp, Head: head, Events: head - cp}, nil
}

func fileSize(path string) int64 {
	if fi, err := os.Stat(path); err == nil {
		return fi.Size()
	}
	return 0
}
