package topicworker

import (
	"fmt"
	"strings"

	"github.com/ductile/ductile/events"
)

// Claim statuses a run ends a claim with (events.MessageClaimEnded's
// status).
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusTimedOut  = "timed_out"
)

// TimedOutSuffix is added to a message's topic to name the topic of its
// follow-up when the command timed out.
const TimedOutSuffix = events.TimedOutTopicSuffix

// Topics are where a worker's follow-ups go.
type Topics struct {
	Topic   string // the topic the worker claims from
	Success string
	Failure string
}

// FollowUp is the reply a run gives a message: the claim's status and
// the follow-up's topic and body.
type FollowUp struct {
	Status string
	Topic  string
	Body   string
	// Error says why it failed or timed out ("" on success), for the claim.
	Error string
}

// FollowUpOf maps how a run ended to its reply: exit 0 is the success
// topic with stdout; the timeout is <topic>.timed_out; any other end
// (non-zero exit, a signal, a command that would not start) is the failure
// topic with stderr, else stdout, else "exited with code N".
//
// The body is made valid UTF-8 (a message's body is text): each invalid
// byte sequence becomes U+FFFD.
func FollowUpOf(r Result, t Topics) FollowUp {
	f := followUpOf(r, t)
	f.Body = strings.ToValidUTF8(f.Body, "\uFFFD")
	return f
}

func followUpOf(r Result, t Topics) FollowUp {
	switch {
	case r.TimedOut:
		body := fmt.Sprintf("timed out after %v\n", r.Duration.Round(1e6))
		if s := strings.TrimSpace(r.Stderr); s != "" {
			body += r.Stderr
		}
		return FollowUp{Status: StatusTimedOut, Topic: t.Topic + TimedOutSuffix, Body: body, Error: "timed out"}
	case r.StartErr != nil:
		return FollowUp{Status: StatusFailed, Topic: t.Failure, Body: r.StartErr.Error(), Error: r.StartErr.Error()}
	case r.ExitCode == 0 && !r.Interrupted:
		return FollowUp{Status: StatusCompleted, Topic: t.Success, Body: r.Stdout}
	}
	why := fmt.Sprintf("exited with code %d", r.ExitCode)
	if r.ExitCode < 0 {
		why = "killed by a signal"
	}
	body := r.Stderr
	if body == "" {
		body = r.Stdout
	}
	if body == "" {
		body = why
	}
	return FollowUp{Status: StatusFailed, Topic: t.Failure, Body: body, Error: why}
}
