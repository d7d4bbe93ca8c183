package metrics

import "github.com/prometheus/client_golang/prometheus"

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
