package config_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
)

func TestTopicsSettings(t *testing.T) {
	cfg, err := loadWebhooks(t, `
topics:
  summarize.request: {max_attempts: 3, backoff: 2s}
  quick: {}
`)
	require.NoError(t, err)
	require.Equal(t, config.TopicConfig{MaxAttempts: 3, Backoff: 2 * time.Second}, cfg.Topic("summarize.request"))
	require.Equal(t, config.DefaultTopic(), cfg.Topic("quick"))
	require.Equal(t, config.TopicConfig{MaxAttempts: 5, Backoff: time.Second}, cfg.Topic("not.named"))

	// config show prints them, defaults filled in.
	shown, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.Contains(t, string(shown), `"topics":{"quick":{"max_attempts":5,"backoff":"1s"},"summarize.request":{"max_attempts":3,"backoff":"2s"}}`)

	// The backoff doubles per expiry up to 5m.
	d := config.DefaultTopic()
	require.Equal(t, time.Second, d.BackoffAfter(1))
	require.Equal(t, 4*time.Second, d.BackoffAfter(3))
	require.Equal(t, 5*time.Minute, d.BackoffAfter(40))
}

func TestTopicsSettingsRefuseNonsense(t *testing.T) {
	for content, want := range map[string]string{
		"topics: {work: {max_attempts: 0}}": "topics.work.max_attempts: must be 1 to 1000, got 0",
		"topics: {work: {backoff: 10m}}":    "topics.work.backoff: must be at most 5m",
		"topics: {work: {backoff: 5}}":      "topics.work.backoff: must be a duration with a unit",
		"topics: {\"a b\": {}}":             `invalid topic name "a b"`,
		"topics: {work: {max_attempt: 2}}":  "topics.work.max_attempt: unknown key: did you mean max_attempts?",
		"topics: [work]":                    "topics: must be a mapping of topic name to settings",
	} {
		_, err := loadWebhooks(t, content+"\n")
		require.ErrorContains(t, err, want, content)
	}
}
