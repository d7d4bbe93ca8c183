package events

// Remote workers on the ledger (issue 23): a worker host on another machine
// registers the plugins it serves, claims a queued job under a lease, renews
// the lease while the plugin runs, and completes the attempt with the
// lease's fence. The claim is the attempt's job.started (with Lease set);
// renewals, and whatever a worker sent with a fence no longer current, are
// recorded on the job's stream too.

// WorkerStream is the stream of one remote worker's registrations.
func WorkerStream(name string) string { return "worker/" + name }

// Remote worker event types.
const (
	// WorkerRegistered records a worker host's registration: who it is and
	// the plugins it serves, with what their manifests declare.
	WorkerRegistered = "worker.registered"
	// JobLeaseRenewed records that the worker holding a job's lease renewed
	// it: at most one per job per third of the lease period (the engine
	// coalesces the renewals between).
	JobLeaseRenewed = "job.lease_renewed"
	// JobSuperseded records what a worker sent with a fence no longer
	// current (a completion, a failure, a renewal, a log batch): kept for
	// forensics, never applied.
	JobSuperseded = "job.superseded"
)

// Lease is a remote worker's hold on a job's running attempt, recorded on
// its job.started: the worker's name, the fence (the job stream's version
// at the claim: it only grows per job) and until when the lease holds
// (RFC 3339, nanoseconds, UTC) unless renewed.
type Lease struct {
	Worker     string `json:"worker"`
	Fence      int64  `json:"fence"`
	LeaseUntil string `json:"lease_until"`
}

// LeaseRenewed is the data of job.lease_renewed.
type LeaseRenewed struct {
	Attempt    int    `json:"attempt"`
	Fence      int64  `json:"fence"`
	LeaseUntil string `json:"lease_until"`
}

// What a superseded request was.
const (
	RefusedComplete = "complete"
	RefusedRenew    = "renew"
	RefusedLog      = "log"
)

// Superseded is the data of job.superseded: what Worker sent (Refused:
// complete, renew, log) for Attempt with Fence, refused because the job's
// current fence is CurrentFence (0: no lease holds it now) or it is no
// longer running (Status), and the outcome kind a refused completion
// carried.
type Superseded struct {
	Refused      string  `json:"refused"`
	Worker       string  `json:"worker"`
	Attempt      int     `json:"attempt"`
	Fence        int64   `json:"fence"`
	CurrentFence int64   `json:"current_fence,omitempty"`
	Status       Status  `json:"status"`
	Kind         Outcome `json:"kind,omitempty"`
}

// WorkerRegisteredData is the data of worker.registered.
type WorkerRegisteredData struct {
	Name    string `json:"name"`
	Host    string `json:"host"`
	Version string `json:"version"` // the worker's ductile version
	PID     int    `json:"pid,omitempty"`
	// Concurrency is how many jobs the worker runs at once.
	Concurrency int            `json:"concurrency,omitempty"`
	Plugins     []WorkerPlugin `json:"plugins"`
	// Token is the name of the API token that registered the worker (set
	// by the daemon, never by the worker): the name is bound to it while
	// that token is configured. Empty in registrations recorded before,
	// or made without a token.
	Token string `json:"token,omitempty" doc:"The API token that registered it (set by the daemon; ignored if sent)"`
}

// WorkerPlugin is one plugin a worker serves, as its manifest on the
// worker's machine declares it: what the daemon needs to enqueue, place and
// complete its jobs without the plugin installed itself.
type WorkerPlugin struct {
	Name            string             `json:"name"`
	Version         string             `json:"version"`
	Commands        []AppliedCommand   `json:"commands"`
	ConcurrencySafe bool               `json:"concurrency_safe"`
	FactOutputs     []WorkerFactOutput `json:"fact_outputs,omitempty"`
}

// WorkerFactOutput is one fact_outputs rule of a worker's plugin manifest.
type WorkerFactOutput struct {
	Command           string `json:"command"`
	From              string `json:"from"`
	FactType          string `json:"fact_type"`
	CompatibilityView string `json:"compatibility_view,omitempty"`
}

// Applied is the plugin as config.applied would record it, enabled.
func (p WorkerPlugin) Applied() AppliedPlugin {
	return AppliedPlugin{Name: p.Name, Version: p.Version, Enabled: true, Commands: p.Commands}
}
