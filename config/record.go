package config

import "github.com/ductile/ductile/events"

// The conversions between config's view types and the settings
// config.applied records (events.Settings), field by field: a field of
// config's renamed or retyped fails to build here instead of changing what
// is stored.

// fileHashSettings is hashes as recorded; never nil.
func fileHashSettings(hashes []FileHash) []events.FileHash {
	out := make([]events.FileHash, 0, len(hashes))
	for _, h := range hashes {
		out = append(out, events.FileHash{Path: h.Path, BLAKE3: h.BLAKE3})
	}
	return out
}

// fileHashesOf is the recorded hashes back; nil for none.
func fileHashesOf(hashes []events.FileHash) []FileHash {
	var out []FileHash
	for _, h := range hashes {
		out = append(out, FileHash{Path: h.Path, BLAKE3: h.BLAKE3})
	}
	return out
}

func (v serviceView) settings() events.ServiceSettings {
	return events.ServiceSettings{MaxWorkers: v.MaxWorkers, DedupeTTL: v.DedupeTTL, JobLogRetention: v.JobLogRetention,
		AllowSymlinks: v.AllowSymlinks, MaxRouteDepth: v.MaxRouteDepth, MaxHookDepth: v.MaxHookDepth,
		LeasePeriod: v.LeasePeriod}
}

func serviceViewOf(s events.ServiceSettings) serviceView {
	return serviceView{MaxWorkers: s.MaxWorkers, DedupeTTL: s.DedupeTTL, JobLogRetention: s.JobLogRetention,
		AllowSymlinks: s.AllowSymlinks, MaxRouteDepth: s.MaxRouteDepth, MaxHookDepth: s.MaxHookDepth,
		LeasePeriod: s.LeasePeriod}
}

// routeSettings is routes as recorded; never nil.
func routeSettings(routes []routeView) []events.RouteSettings {
	out := make([]events.RouteSettings, 0, len(routes))
	for _, r := range routes {
		out = append(out, events.RouteSettings{From: r.From, EventType: r.EventType, To: r.To, Command: r.Command})
	}
	return out
}

// routeViewsOf is the recorded routes back; nil for none.
func routeViewsOf(routes []events.RouteSettings) []routeView {
	var out []routeView
	for _, r := range routes {
		out = append(out, routeView{From: r.From, EventType: r.EventType, To: r.To, Command: r.Command})
	}
	return out
}

// settings is the plugin as recorded, its config: map by configHash only.
func (v pluginView) settings(configHash string) events.PluginSettings {
	s := events.PluginSettings{
		Enabled: v.Enabled, Parallelism: v.Parallelism, MaxOutstandingPolls: v.MaxOutstandingPolls,
		Retry:    events.RetrySettings{MaxAttempts: v.Retry.MaxAttempts, BackoffBase: v.Retry.BackoffBase},
		Timeouts: events.TimeoutSettings{Poll: v.Timeouts.Poll, Handle: v.Timeouts.Handle, Health: v.Timeouts.Health, Init: v.Timeouts.Init},
		CircuitBreaker: events.BreakerSettings{Enabled: v.CircuitBreaker.Enabled, Threshold: v.CircuitBreaker.Threshold,
			ResetAfter: v.CircuitBreaker.ResetAfter},
		NotifyOnComplete: v.NotifyOnComplete, ConfigHash: configHash, RunsOn: v.RunsOn,
	}
	for _, e := range v.Schedules {
		s.Schedules = append(s.Schedules, e.settings())
	}
	return s
}

// pluginViewOf is the recorded plugin back, its config: map empty.
func pluginViewOf(s events.PluginSettings) pluginView {
	v := pluginView{
		Enabled: s.Enabled, Parallelism: s.Parallelism, MaxOutstandingPolls: s.MaxOutstandingPolls,
		Retry:    retryView{MaxAttempts: s.Retry.MaxAttempts, BackoffBase: s.Retry.BackoffBase},
		Timeouts: timeoutsView{Poll: s.Timeouts.Poll, Handle: s.Timeouts.Handle, Health: s.Timeouts.Health, Init: s.Timeouts.Init},
		CircuitBreaker: circuitBreakerView{Enabled: s.CircuitBreaker.Enabled, Threshold: s.CircuitBreaker.Threshold,
			ResetAfter: s.CircuitBreaker.ResetAfter},
		NotifyOnComplete: s.NotifyOnComplete, Config: map[string]any{}, RunsOn: s.RunsOn,
	}
	for _, e := range s.Schedules {
		v.Schedules = append(v.Schedules, scheduleViewOf(e))
	}
	return v
}

func (v scheduleView) settings() events.ScheduleSettings {
	return events.ScheduleSettings{ID: v.ID, Command: v.Command, Payload: v.Payload, Every: v.Every, Cron: v.Cron, At: v.At, After: v.After,
		Jitter: v.Jitter, OnlyBetween: v.OnlyBetween, PreferredWindow: v.PreferredWindow, NotOn: v.NotOn, Timezone: v.Timezone,
		CatchUp: v.CatchUp, IfRunning: v.IfRunning}
}

func scheduleViewOf(s events.ScheduleSettings) scheduleView {
	return scheduleView{ID: s.ID, Command: s.Command, Payload: s.Payload, Every: s.Every, Cron: s.Cron, At: s.At, After: s.After,
		Jitter: s.Jitter, OnlyBetween: s.OnlyBetween, PreferredWindow: s.PreferredWindow, NotOn: s.NotOn, Timezone: s.Timezone,
		CatchUp: s.CatchUp, IfRunning: s.IfRunning}
}
