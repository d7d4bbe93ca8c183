package events_test

import (
	"encoding/json"
	"time"

	"github.com/ductile/ductile/events"
)

// goldenExamples is a representative value of the data of every event
// type, keyed by type: every field set that a real event sets, so that
// each is pinned by its golden.
func ptr[T any](v T) *T { return &v }

func goldenExamples() map[string]any {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	at := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			panic(err)
		}
		return t
	}
	ended := events.AttemptEnded{Attempt: 2, Error: "exit status 1", Kind: events.OutcomeError, Retryable: true, ExitCode: 1, DurationMS: 41,
		Response: raw(`{"status":"error","error":"upstream down","retry":true}`),
		Stdout:   "o\n[ductile: 9 bytes left out here; 11 bytes in all]\no", StdoutBytes: 11,
		Stderr: "e\n[ductile: 1 bytes left out here; 3 bytes in all]\ne", StderrTruncated: true, StderrBytes: 3,
		DroppedRoutes: []events.DroppedRoute{{Plugin: "echo", Command: "handle", EventType: "echo.done", Depth: 9, Limit: 8, Reason: "past service.max_route_depth (8)"}}}
	breaker := events.BreakerChanged{From: events.BreakerStateClosed, State: events.BreakerStateOpen, Reason: events.BreakerReasonFailureThreshold,
		Failures: 3, Threshold: 3, JobID: "01JBX0000000000000000000AB", LastError: "exit status 1",
		OpenedAt: "2026-11-28T12:00:00.000000000Z", ProbeAt: "2026-11-28T12:05:00.000000000Z", ProbeJobID: "01JBX0000000000000000000AC"}
	progress := events.RunProgress{
		Enqueued: []events.RunJob{{JobID: "01JBX0000000000000000000B1", Node: "fetch", Event: "ductile.api", Error: "baggage claim would change inherited context key repo"}},
		Skipped:  []events.SkippedStep{{Node: "notify", Reason: "if is false", Event: "fetch.done"}},
		Dropped:  []events.DroppedStep{{Node: "deep", Depth: 9, Limit: 8, Reason: "past max_depth (8)"}},
		Opened:   []string{"01JBX0000000000000000000S1"},
		Closed:   []events.ClosedSplit{{Split: "01JBX0000000000000000000S0", Node: "fan", Status: events.SplitFailed, Error: "branch 1 failed"}},
		State: events.RunState{Outstanding: 2,
			Splits: []events.OpenSplit{{ID: "01JBX0000000000000000000S1", Node: "fan", Outer: []string{"01JBX0000000000000000000S0"}, OuterBranch: []int{1},
				Context: raw(`{"repo":"ductile"}`), Outstanding: 1,
				Branches: []events.BranchEnd{{Branch: 0, Node: "a", JobID: "01JBX0000000000000000000B2", Status: events.StatusDead, Error: "exit status 1"}}}},
			Results:   []events.PathEnd{{JobID: "01JBX0000000000000000000B3", Node: "done", Status: events.StatusSucceeded, Error: ""}},
			Failed:    true,
			Error:     "step a failed",
			BaseDepth: 1},
	}
	slot := events.Slot{Nominal: at("2026-11-28T12:00:00Z"), Due: at("2026-11-28T12:00:07.25Z"), Start: at("2026-11-28T11:00:00Z")}
	return map[string]any{
		events.WorkerRegistered: events.WorkerRegisteredData{Name: "gpu-box", Host: "gpu-box.lan", Version: "0.23.0", PID: 5100, Concurrency: 4, Token: "gpu-box",
			Plugins: []events.WorkerPlugin{{Name: "render", Version: "1.2.0", Commands: []events.AppliedCommand{{Name: "handle", Type: "write"}},
				ConcurrencySafe: true, FactOutputs: []events.WorkerFactOutput{{Command: "handle", From: "state_updates", FactType: "render.frames", CompatibilityView: "mirror_object"}}}}},
		events.JobLeaseRenewed: events.LeaseRenewed{Attempt: 2, Fence: 3, LeaseUntil: "2026-11-28T12:01:00.000000000Z"},
		events.JobSuperseded: events.Superseded{Refused: events.RefusedComplete, Worker: "gpu-box", Attempt: 1, Fence: 3, CurrentFence: 7,
			Status: events.StatusRunning, Kind: events.OutcomeOK},
		events.JobEnqueued: events.Enqueued{JobID: "01JBX0000000000000000000AB", Plugin: "echo", Command: "handle", Payload: raw(`{"text":"hi"}`),
			MaxAttempts: 4, BackoffBaseMS: 30000, SubmittedBy: "cli", DedupeKey: "echo:hi", DedupeTTLMS: 60000,
			ParentJobID: "01JBX0000000000000000000AA", SourceEventID: "01JBX0000000000000000000E1",
			Event:   raw(`{"type":"echo.said","payload":{"text":"hi"},"event_id":"01JBX0000000000000000000E1","source":"echo","timestamp":"2026-11-28T12:00:00Z"}`),
			RetryOf: "01JBX0000000000000000000A9", Depth: 1,
			Pipeline: &events.PipelineStep{Run: "01JBX0000000000000000000R1", Pipeline: "build", Hash: "blake3:ab12", Node: "fetch",
				Splits: []string{"01JBX0000000000000000000S1"}, Branches: []int{2}},
			Context: raw(`{"repo":"ductile"}`), ReplayOf: "01JBX0000000000000000000A8", HookDepth: 1,
			TaskID: "task-42", TraceID: "trace-7", IdempotencyKey: "create-42", RootJobID: "01JBX0000000000000000000A7", RunAttempt: 3},
		events.JobStarted: events.Started{Attempt: 2, DeadlineAt: "2026-11-28T12:00:30.000000000Z", PID: 4100,
			Plugin: &events.PluginProcess{PGID: 4242, StartTicks: 987654, BootID: "0e1f6c2a-5b8e-4f51-9d37-2f1b0c9a7e11"},
			Lease:  &events.Lease{Worker: "gpu-box", Fence: 3, LeaseUntil: "2026-11-28T12:00:45.000000000Z"}},
		events.JobSucceeded: events.AttemptEnded{Attempt: 1, Kind: events.OutcomeOK, DurationMS: 3, Response: raw(`{"status":"ok","result":{"n":1}}`), Stderr: "hi\n",
			ResultRefs: []string{"01JBX0000000000000000000AB:1", "01JBX0000000000000000000AB:2"}},
		events.JobFailed: ended,
		events.JobTimedOut: events.AttemptEnded{Attempt: 1, Error: "timed out after 30s", Kind: events.OutcomeTimeout, Retryable: true, ExitCode: -1, DurationMS: 30004,
			Stderr: "working\n"},
		events.JobRetryScheduled: events.RetryScheduled{Attempt: 3, NextRetryAt: "2026-11-28T12:01:00.000000000Z", DelayMS: 60000, MaxAttempts: 5},
		events.JobDead: events.Dead{Attempt: 4, Reason: "max attempts (4) reached",
			DroppedHooks: []events.DroppedRoute{{Plugin: "notify", Command: "handle", EventType: "job.dead", Depth: 3, Limit: 2, Reason: "past service.max_hook_depth (2)"}},
			ResultRefs:   []string{"01JBX0000000000000000000AB:1"}},
		events.JobCancelRequested: events.Canceled{Attempt: 1, Reason: "canceled by cli"},
		events.JobCanceled:        events.Canceled{Attempt: 1, Reason: "canceled by cli", ResultRefs: []string{"01JBX0000000000000000000AB:1"}},
		events.JobProgressed:      events.Progressed{Attempt: 1, Progress: ptr(0.4), Message: "page 4 of 10", Stage: "fetch", Lines: 12},
		events.JobExported: events.Exported{ExportItemID: "01JBX0000000000000000000AB:2", Attempt: 1, Type: events.ExportText, Text: "4 new posts",
			MIME: "text/plain", Description: "summary", Metadata: raw(`{"lang":"en"}`), TraceID: "trace-7"},
		events.IdempotencyReserved: events.IdempotencyReservedData{JobID: "01JBX0000000000000000000AB", Plugin: "echo", Command: "poll"},
		events.JobRecovered:        events.Recovered{Attempt: 1, NextAttempt: 2, Requeued: true, Reason: "the daemon (pid 4100) died while it ran"},
		events.JobRetried:          events.Retried{RetryJobID: "01JBX0000000000000000000AD"},
		events.JobReplayed:         events.Replayed{ReplayJobID: "01JBX0000000000000000000AE"},
		events.JobStderrWritten: events.StderrWritten{Attempt: 1, Line: 3, Truncated: true,
			Lines: []events.StderrLine{{At: "2026-11-28T12:00:00.123456789Z", Text: "step 3"}, {At: "2026-11-28T12:00:00.223456789Z", Text: "step 4"}}},
		events.PluginFactRecorded: events.FactRecorded{FactType: "feed_cursor", JobID: "01JBX0000000000000000000AB", Command: "poll", Fact: raw(`{"cursor":"b"}`), View: "mirror_object"},
		events.PluginStateMerged: events.StateMerged{JobID: "01JBX0000000000000000000AB", Command: "poll", Updates: raw(`{"cursor":"b"}`),
			State: raw(`{"cursor":"b","seen":2}`)},
		events.DedupeReserved:        events.DedupeReservedData{JobID: "01JBX0000000000000000000AB"},
		events.DedupeReleased:        events.DedupeReleasedData{JobID: "01JBX0000000000000000000AB", Status: events.StatusSucceeded, CompletedAt: "2026-11-28T12:00:03.000000000Z"},
		events.ConfigApplied:         appliedExample(),
		events.ConfigReloadRequested: events.ReloadRequestedData{PID: 4100, Force: true},
		events.ConfigReloadFailed: events.ReloadFailedData{PID: 4100, Through: 812, Error: "plugin nope: not found\nroute 0: to nope: no such plugin",
			Errors: []string{"plugin nope: not found", "route 0: to nope: no such plugin"}, Forceable: true},
		events.LogPruned:            events.LogPrunedData{Before: "2026-11-21T12:00:00.000000000Z", Retention: "168h", Jobs: 12, By: "daemon"},
		events.LedgerRestoreAdopted: events.LedgerRestoreAdoptedData{HeadSeq: 812, HeadHash: "9f1c", WitnessSeq: 840, WitnessHash: "77ab", Missing: 28},
		events.LedgerArchived: events.LedgerArchivedData{File: "ledger-000001-000812.archive", FirstSeq: 1, LastSeq: 812, Events: 812,
			PrevHash: "0000000000000000000000000000000000000000000000000000000000000000", LastHash: "9f1c", ContentHash: "3be0", Before: "2026-11-21T12:00:00.000000000Z"},
		events.PluginInitialized: events.InitializedData{ConfigHash: "blake3:77aa", Version: "1.2.0", RunID: "01JBX0000000000000000000I1", DurationMS: 12},
		events.PluginInitFailed: events.InitFailedData{ConfigHash: "blake3:77aa", Version: "1.2.0", RunID: "01JBX0000000000000000000I2", Error: "exit status 2",
			Outcome: events.OutcomeError, ExitCode: 2, Stderr: "missing token\n", DurationMS: 9},
		events.PluginHealthChecked: events.HealthCheckedData{Status: events.Unhealthy, Message: "upstream unreachable", Outcome: events.OutcomeOK,
			RunID: "01JBX0000000000000000000H1", DurationMS: 20},
		events.BreakerFailureRecorded: events.BreakerChanged{From: events.BreakerStateClosed, State: events.BreakerStateClosed, Reason: events.BreakerReasonFailure,
			Failures: 1, Threshold: 3, JobID: "01JBX0000000000000000000AB", LastError: "exit status 1"},
		events.BreakerFailuresCleared: events.BreakerChanged{From: events.BreakerStateClosed, State: events.BreakerStateClosed, Reason: events.BreakerReasonSuccess,
			Threshold: 3, JobID: "01JBX0000000000000000000AB"},
		events.BreakerOpened: breaker,
		events.BreakerHalfOpened: events.BreakerChanged{From: events.BreakerStateOpen, State: events.BreakerStateHalfOpen, Reason: events.BreakerReasonCooldownElapsed,
			Failures: 3, Threshold: 3, LastError: "exit status 1", OpenedAt: "2026-11-28T12:00:00.000000000Z", ProbeAt: "2026-11-28T12:05:00.000000000Z",
			ProbeJobID: "01JBX0000000000000000000AC"},
		events.BreakerClosed: events.BreakerChanged{From: events.BreakerStateHalfOpen, State: events.BreakerStateClosed, Reason: events.BreakerReasonSuccess,
			Threshold: 3, JobID: "01JBX0000000000000000000AC"},
		events.BreakerReset: events.BreakerChanged{From: events.BreakerStateOpen, State: events.BreakerStateClosed, Reason: events.BreakerReasonManualReset, Failures: 0},
		events.ScheduleFired: events.ScheduleFiredData{Plugin: "echo", ID: "nightly", Slot: slot, JobID: "01JBX0000000000000000000AB", Command: "poll",
			Action: "cancel", Reason: "if_running cancel: 1 job still running", Canceled: []string{"01JBX0000000000000000000A7"},
			Open: []string{"01JBX0000000000000000000AB"}},
		events.ScheduleSkipped: events.ScheduleSkippedData{Plugin: "echo", ID: "nightly", Slot: slot,
			First: events.Slot{Nominal: at("2026-11-27T12:00:00Z"), Due: at("2026-11-27T12:00:07.25Z")}, Count: 2, AtLeast: true,
			Reason: "catch_up none: missed while stopped", Open: []string{}},
		events.PipelineRunStarted: events.RunStarted{
			RunStartedData: events.RunStartedData{RunID: "01JBX0000000000000000000R1", Pipeline: "build", Hash: "blake3:ab12", Mode: "synchronous",
				Trigger: "api", JobID: "01JBX0000000000000000000B1", SubmittedBy: "token:ci"},
			RunProgress: progress},
		events.PipelineRunFinished: events.RunFinishedData{RunID: "01JBX0000000000000000000R1", Status: events.RunFailed, Error: "step a failed",
			Results: []events.RunResult{{JobID: "01JBX0000000000000000000B3", Node: "done", Plugin: "echo", Command: "handle", Status: events.StatusSucceeded,
				Result: raw(`{"n":1}`)}, {JobID: "01JBX0000000000000000000B2", Node: "a", Plugin: "echo", Command: "handle", Status: events.StatusDead, Error: "exit status 1"}}},
		events.PipelineStepEnded: events.StepEndedData{RunID: "01JBX0000000000000000000R1", JobID: "01JBX0000000000000000000B1", Node: "fetch",
			Status: events.StatusSucceeded, RunProgress: progress},
		events.PipelineCompiled: events.CompiledData{Name: "build", Hash: "blake3:ab12",
			Pipeline: raw(`{"name":"build","nodes":[{"id":"fetch","uses":"echo.handle"}]}`)},
	}
}

// appliedExample is a config.applied as a daemon records it: a reload,
// with every section of the settings set.
func appliedExample() events.ConfigAppliedData {
	schedules := []events.ScheduleSettings{
		{ID: "nightly", Command: "poll", Payload: map[string]any{"full": true}, Cron: "0 2 * * *", Jitter: "30s",
			OnlyBetween: []string{"01:00-05:00"}, PreferredWindow: []string{"02:00-03:00"}, NotOn: []string{"sunday"},
			Timezone: "Europe/Paris", CatchUp: "latest", IfRunning: "skip"},
		{ID: "often", Command: "poll", Every: "5m", Jitter: "0s", Timezone: "UTC", CatchUp: "none", IfRunning: "queue"},
		{ID: "once", Command: "poll", At: "2026-12-01T09:00:00Z", Jitter: "0s", Timezone: "UTC", CatchUp: "all", IfRunning: "cancel"},
		{ID: "warmup", Command: "poll", After: "10s", Jitter: "0s", Timezone: "UTC", CatchUp: "none", IfRunning: "skip"},
	}
	return events.ConfigAppliedData{Reason: "reload", PID: 4100, StartedAt: "2026-11-28T11:00:00Z",
		Plugins: []events.AppliedPlugin{{Name: "echo", Version: "1.2.0", Dir: "/srv/ductile/plugins/echo", Enabled: true,
			Commands: []events.AppliedCommand{{Name: "poll", Type: "read"}, {Name: "handle", Type: "write"}}}},
		Skipped: []events.SkippedPlugin{{Name: "broken", Dir: "/srv/ductile/plugins/broken", Reason: "manifest: missing name"}},
		Settings: events.Settings{Hash: "blake3:5e77", Source: "/etc/ductile/config.yaml",
			Files:    []events.FileHash{{Path: "/etc/ductile/config.yaml", BLAKE3: "blake3:0a1b"}},
			StateDir: "/var/lib/ductile", PluginRoots: []string{"/srv/ductile/plugins"},
			Service: events.ServiceSettings{MaxWorkers: 3, DedupeTTL: "1h", JobLogRetention: "168h", MaxRouteDepth: 8, MaxHookDepth: 2, LeasePeriod: "30s"},
			Plugins: map[string]events.PluginSettings{"echo": {Enabled: true, Parallelism: 2, MaxOutstandingPolls: 1,
				Retry:            events.RetrySettings{MaxAttempts: 4, BackoffBase: "30s"},
				Timeouts:         events.TimeoutSettings{Poll: "1m", Handle: "2m", Health: "10s", Init: "30s"},
				CircuitBreaker:   events.BreakerSettings{Enabled: true, Threshold: 3, ResetAfter: "5m"},
				NotifyOnComplete: true, ConfigHash: "blake3:77aa", Schedules: schedules, RunsOn: "any"}},
			Routes: []events.RouteSettings{{From: "echo", EventType: "echo.said", To: "echo", Command: "handle"}},
			Tokens: []events.TokenSettings{{Name: "ci", Scopes: []string{"jobs:rw", "plugin:rw"}}},
			Sections: map[string]string{"api": "blake3:aa01", "pipelines": "blake3:aa02", "secrets": "blake3:aa03", "tokens": "blake3:aa04",
				"webhooks": "blake3:aa05"}},
		Through: 812,
		Changes: []events.SettingChange{{Path: "service.max_workers", File: float64(3), Applied: float64(2)},
			{Path: "plugins.echo.schedules[warmup]", File: map[string]any{"id": "warmup"}}},
		Pipelines:        []events.AppliedPipeline{{Name: "build", Hash: "blake3:ab12"}},
		SkippedPipelines: []events.SkippedPipeline{{Name: "deploy", Reason: "step ship uses plugin ship, which did not load"}},
		Errors:           []string{"plugin broken: manifest: missing name"},
		Warnings:         []string{"plugins.echo.config.unused: undeclared key"},
	}
}
