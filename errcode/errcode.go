// Package errcode is the one list of error codes: the stable,
// machine-readable kind of an error that every front end reports (the
// HTTP API's and the webhook listener's error bodies, the event stream's,
// the CLI's --json errors). The same mistake has the same code wherever it
// is made: a bad flag on the command line and a bad field in a request
// body are both InvalidInput. Scripts and clients rely on these names: add
// codes, never rename one.
package errcode

// Code is the stable kind of an error.
type Code string

// The codes. HTTP statuses are the API's; the CLI exits 2 for InvalidInput
// and 1 for every other code.
const (
	// InvalidInput: bad flags or arguments, a malformed or invalid request
	// (400, and 405 for a method a path does not answer).
	InvalidInput Code = "invalid_input"
	// Unauthorized: no token, or one that is not known (401).
	Unauthorized Code = "unauthorized"
	// Forbidden: the token's scopes do not grant it, or a webhook's
	// signature does not match (403).
	Forbidden Code = "forbidden"
	// NotFound: a job, plugin, file or path named does not exist (404).
	NotFound Code = "not_found"
	// Conflict: the state does not allow it now: a finished job, a held
	// lock, an existing file (409).
	Conflict Code = "conflict"
	// Archived: a moment whose events an archive moved out of the ledger (410).
	Archived Code = "archived"
	// TooLarge: a request body larger than the limit (413).
	TooLarge Code = "too_large"
	// Unavailable: it cannot be done now (a plugin that cannot run, a
	// ledger that cannot record): nothing was done; try again later (503).
	Unavailable Code = "unavailable"
	// TooManySync: api.max_concurrent_sync callers wait already (503).
	TooManySync Code = "too_many_sync"
	// TooManyStreams: the token has api.max_streams_per_token event
	// streams open already (429).
	TooManyStreams Code = "too_many_streams"
	// IdempotencyConflict: an idempotency key given with another plugin or
	// entry than the run it made (409).
	IdempotencyConflict Code = "idempotency_conflict"
	// StaleFence: a remote worker sent a renewal, log batch, progress,
	// completion or failure under a lease that no longer holds the job: it
	// was recorded as superseded and not applied; the worker drops the
	// job (409).
	StaleFence Code = "stale_fence"
	// UnknownWorker: a worker asked for work before registering, or for
	// plugins it may not claim jobs of (409).
	UnknownWorker Code = "unknown_worker"
	// WorkerNameTaken: a worker name is bound to another API token, the
	// one that registered it first (409).
	WorkerNameTaken Code = "worker_name_taken"
	// PluginNotPermitted: a worker token limited to named plugins
	// (worker:plugin=NAME) registered or claimed another plugin (403).
	PluginNotPermitted Code = "plugin_not_permitted"
	// RunFailed: a synchronous pipeline's run failed (424).
	RunFailed Code = "run_failed"
	// InvalidConfig: the config file does not load.
	InvalidConfig Code = "invalid_config"
	// Timeout: gave up waiting (--timeout).
	Timeout Code = "timeout"
	// Canceled: interrupted by SIGINT or SIGTERM.
	Canceled Code = "canceled"
	// Error: any other failure (500).
	Error Code = "error"
)
