package config

import (
	"regexp"
	"time"

	"go.yaml.in/yaml/v3"
)

// Topic exchange defaults and bounds (topics.<name>, docs/topics.md).
const (
	// DefaultTopicMaxAttempts is topics.<name>.max_attempts left out: how
	// many claims of a message by one worker group may run out their lease
	// before the message goes to <topic>.dead.
	DefaultTopicMaxAttempts = 5
	// DefaultTopicBackoff is topics.<name>.backoff left out: the wait after
	// a claim's lease ran out before the message may be claimed again,
	// doubled at each expiry up to MaxTopicBackoff.
	DefaultTopicBackoff = time.Second
	// MaxTopicBackoff caps the doubled backoff (and topics.<name>.backoff).
	MaxTopicBackoff = 5 * time.Minute
	// MaxTopicAttempts bounds topics.<name>.max_attempts.
	MaxTopicAttempts = 1000
)

// TopicRoutePrefix marks a route's from, or a pipeline's on, that
// listens on a topic: topic:<name>.
const TopicRoutePrefix = "topic:"

// TopicRouteEvent is the event_type of a route from a topic (the only
// one: a message's publication); such a route may leave it out.
const TopicRouteEvent = "message.published"

// TopicName is the form of a topic's name.
var TopicName = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,200}$`)

// TopicConfig is one topic's settings.
type TopicConfig struct {
	// MaxAttempts is how many claims of a message by one group may expire
	// before its dead letter (1: the first expiry).
	MaxAttempts int
	// Backoff is the wait after the first expiry; it doubles at each
	// further one, capped at MaxTopicBackoff.
	Backoff time.Duration
}

// DefaultTopic is a topic's settings when the config does not name it.
func DefaultTopic() TopicConfig {
	return TopicConfig{MaxAttempts: DefaultTopicMaxAttempts, Backoff: DefaultTopicBackoff}
}

// Topic returns the settings of topic name: the config's, else the
// defaults.
func (c *Config) Topic(name string) TopicConfig {
	if c != nil {
		if t, ok := c.Topics[name]; ok {
			return t
		}
	}
	return DefaultTopic()
}

// BackoffAfter is the wait before a message may be claimed again after
// the attempt-th claim of it expired (attempt from 1): Backoff doubled
// attempt-1 times, capped at MaxTopicBackoff.
func (t TopicConfig) BackoffAfter(attempt int) time.Duration {
	d := t.Backoff
	for i := 1; i < attempt && d < MaxTopicBackoff; i++ {
		d *= 2
	}
	return min(d, MaxTopicBackoff)
}

// topics decodes the topics: section: topic name → settings.
func (l *loader) topics(n *yaml.Node, path string, cfg *Config) {
	if n.Kind != yaml.MappingNode {
		l.fail(n, path, "must be a mapping of topic name to settings, e.g. topics: {summarize: {max_attempts: 3}}")
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := k.Value
		tpath := joinPath(path, name)
		if k.Kind != yaml.ScalarNode || !TopicName.MatchString(name) {
			l.fail(k, tpath, "invalid topic name %q: 1 to 200 of A-Z a-z 0-9 . _ : -", name)
			continue
		}
		t := DefaultTopic()
		l.object(v, tpath, "",
			field{"max_attempts", func(v *yaml.Node, path string) {
				if i, ok := l.integer(v, path); ok {
					if i < 1 || i > MaxTopicAttempts {
						l.fail(v, path, "must be 1 to %d, got %d (claims of a message whose lease may run out before its dead letter)", MaxTopicAttempts, i)
						return
					}
					t.MaxAttempts = i
				}
			}},
			field{"backoff", func(v *yaml.Node, path string) {
				var d time.Duration
				l.duration(v, path, &d) // reports what is not a positive duration
				switch {
				case d > MaxTopicBackoff:
					l.fail(v, path, "must be at most 5m (the cap of the doubled backoff), got %s", v.Value)
				case d > 0:
					t.Backoff = d
				}
			}},
		)
		if cfg.Topics == nil {
			cfg.Topics = map[string]TopicConfig{}
		}
		cfg.Topics[name] = t
	}
}
