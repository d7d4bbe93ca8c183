package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// topicSeries are the counters of the topic exchange's routes in this
// process (reset when it restarts, as every _total series the process
// counts itself).
type topicSeries struct {
	published *prometheus.CounterVec
	claims    *prometheus.CounterVec
}

func newTopicSeries() topicSeries {
	return topicSeries{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ductile_topic_messages_published_total",
			Help: "Messages published through this process's API (POST /topics/{topic}/messages and topic workers' follow-ups), by topic.",
		}, []string{"topic"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ductile_topic_claims_total",
			Help: "Topic workers' claims through this process's API, by topic and status: claimed, then how they ended " +
				"(completed, failed, timed_out) or superseded (a renewal or finish refused for a stale fence).",
		}, []string{"topic", "status"}),
	}
}

func (t topicSeries) collectors() []prometheus.Collector {
	return []prometheus.Collector{t.published, t.claims}
}

// TopicPublished counts a message published to topic.
func (m *Metrics) TopicPublished(topic string) {
	m.topics.published.WithLabelValues(topic).Inc()
}

// TopicClaim counts a claim of a message of topic (status claimed), its
// end (completed, failed, timed_out) or a refused request (superseded).
func (m *Metrics) TopicClaim(topic, status string) {
	m.topics.claims.WithLabelValues(topic, status).Inc()
}

// The topic gauges read from the projections at scrape time, so that they
// count what every process did on the ledger (a topic worker on the local
// ledger claims without the API): the backlog of each group that has
// claimed from a topic, and the active claims, live or expired.
var (
	topicBacklogDesc = prometheus.NewDesc("ductile_topic_backlog",
		"Messages of each topic a worker group has not finished (claimed or not), for each group that has claimed from the topic (counted after its cursor: the messages before it are all done).",
		[]string{"topic", "group"}, nil)
	topicClaimsActiveDesc = prometheus.NewDesc("ductile_topic_claims_active",
		"Active claims of topic messages now, by topic and state: live (the lease holds) or expired (claimable again once its backoff passes).",
		[]string{"topic", "state"}, nil)
)

// collectTopics sends the topic gauges, as of now.
func collectTopics(ctx context.Context, l *ledger.Ledger, now time.Time, ch chan<- prometheus.Metric) {
	type key struct{ topic, state string }
	active := map[key]int{}
	var backlogs []queries.TopicBacklogsRow
	err := l.Read(ctx, func(conn *sqlite.Conn) error {
		if err := queries.TopicBacklogs(conn, func(r queries.TopicBacklogsRow) error {
			backlogs = append(backlogs, r)
			return nil
		}); err != nil {
			return err
		}
		return queries.ListActiveTopicClaims(conn, func(r queries.ListActiveTopicClaimsRow) error {
			state := "live"
			if until, err := time.Parse(time.RFC3339Nano, r.LeaseUntil); err == nil && !now.Before(until) {
				state = "expired"
			}
			active[key{r.Topic, state}]++
			return nil
		})
	})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(topicBacklogDesc, err)
		ch <- prometheus.NewInvalidMetric(topicClaimsActiveDesc, err)
		return
	}
	for _, b := range backlogs {
		ch <- prometheus.MustNewConstMetric(topicBacklogDesc, prometheus.GaugeValue, float64(b.Backlog), b.Topic, b.WorkerGroup)
	}
	for k, n := range active {
		ch <- prometheus.MustNewConstMetric(topicClaimsActiveDesc, prometheus.GaugeValue, float64(n), k.topic, k.state)
	}
}
