package config_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/schedule"
)

func mustEvery(t *testing.T, s string) schedule.Rule {
	t.Helper()
	r, err := schedule.ParseEvery(s)
	require.NoError(t, err)
	return r
}

func mustWindows(t *testing.T, specs ...string) []schedule.Window {
	t.Helper()
	var out []schedule.Window
	for _, s := range specs {
		w, err := schedule.ParseWindow(s)
		require.NoError(t, err)
		out = append(out, w)
	}
	return out
}

// TestSchedules: plugins.<name>.schedules decodes into validated entries,
// every default filled in.
func TestSchedules(t *testing.T) {
	t.Parallel()
	c, err := config.Load(fixture(t, "schedules", "config.yaml"))
	require.NoError(t, err)
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	nightly, err := schedule.ParseCron("30 2 * * 1-5")
	require.NoError(t, err)
	defaults := schedule.Entry{ID: "default", Command: "poll", Timezone: "Local", Location: time.Local, CatchUp: "skip", IfRunning: "skip"}
	with := func(change func(e *schedule.Entry)) schedule.Entry {
		e := defaults
		change(&e)
		return e
	}

	echo := c.Plugin("echo")
	require.Equal(t, 2, echo.MaxOutstandingPolls)
	require.Equal(t, []schedule.Entry{
		with(func(e *schedule.Entry) { e.Kind, e.Rule = schedule.KindEvery, mustEvery(t, "5m") }),
		with(func(e *schedule.Entry) {
			e.ID, e.Command, e.Payload = "nightly", "handle", map[string]any{"full": true, "depth": 3}
			e.Kind, e.Rule, e.Jitter = schedule.KindCron, nightly, 10*time.Minute
			e.Timezone, e.Location = "Europe/Berlin", berlin
			e.NotOn = []time.Weekday{time.Friday, time.Saturday}
			e.OnlyBetween = mustWindows(t, "01:00-05:00")
			e.CatchUp, e.IfRunning = schedule.CatchUpRunOnce, schedule.IfRunningCancel
		}),
		with(func(e *schedule.Entry) {
			e.ID, e.Kind, e.Rule = "windows", schedule.KindEvery, mustEvery(t, "hourly")
			e.PreferredWindow = mustWindows(t, "22:00-02:00", "12:00-13:00")
			e.CatchUp, e.IfRunning = schedule.CatchUpRunAll, schedule.IfRunningQueue
		}),
		with(func(e *schedule.Entry) {
			e.ID, e.Kind, e.At = "once", schedule.KindAt, time.Date(2026, 12, 1, 9, 0, 0, 0, time.FixedZone("", 3600))
			e.PreferredWindow = mustWindows(t, "08:00-18:00")
		}),
		with(func(e *schedule.Entry) {
			e.ID, e.Command, e.Kind, e.After = "warmup", "handle", schedule.KindAfter, 0
			e.Timezone, e.Location = "UTC", time.UTC
		}),
	}, echo.Schedules)

	other := c.Plugin("other")
	require.Equal(t, 1, other.MaxOutstandingPolls)
	require.Equal(t, []schedule.Entry{
		with(func(e *schedule.Entry) {
			e.ID, e.Kind, e.Rule, e.Jitter = "a.b-c_1", schedule.KindEvery, mustEvery(t, "2d"), time.Hour
			e.NotOn = []time.Weekday{time.Sunday}
		}),
		with(func(e *schedule.Entry) { e.ID, e.Kind, e.Rule = "weekly", schedule.KindEvery, mustEvery(t, "weekly") }),
	}, other.Schedules)

	// A plugin the config does not mention has no schedules and the
	// default poll guard.
	require.Nil(t, c.Plugin("unconfigured").Schedules)
	require.Equal(t, 1, c.Plugin("unconfigured").MaxOutstandingPolls)
}

// TestScheduleErrors asserts the exact report for broken schedule
// entries: file:line, the key path, what is wrong and the fix.
func TestScheduleErrors(t *testing.T) {
	t.Parallel()
	_, err := config.Load(fixture(t, "schedules-invalid", "config.yaml"))
	var ve *config.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, []string{
		`config.yaml:5: plugins.echo.schedules[1].every: invalid interval "5 minutes": use a duration like 90s, 15m or 2h (at least 1s), whole days like 2d, or one of hourly, daily, weekly, monthly`,
		`config.yaml:6: plugins.echo.schedules[2].every: must be a duration with a unit, like 60s, got 60`,
		`config.yaml:7: plugins.echo.schedules[3].cron: every and cron are both set: an entry has one of every, cron, at or after (make another entry for the other)`,
		`config.yaml:8: plugins.echo.schedules[4]: missing: say when it runs with one of every, cron, at or after, e.g. every: 5m`,
		`config.yaml:9: plugins.echo.schedules[5].cron: invalid cron "0 0 30 2 *": it never matches a date (like February 30th)`,
		`config.yaml:10: plugins.echo.schedules[6].cron: invalid cron "61 * * * *": end of range (61) above maximum (59): 61 (fields: minute 0-59, hour 0-23, day-of-month 1-31, month 1-12, day-of-week 0-6 with 0 Sunday)`,
		`config.yaml:11: plugins.echo.schedules[7].at: invalid time "2026-12-01": write an RFC 3339 time with its offset, e.g. 2026-12-01T09:00:00Z or 2026-12-01T09:00:00+01:00`,
		`config.yaml:12: plugins.echo.schedules[8].after: must not be negative, got -5m`,
		`config.yaml:13: plugins.echo.schedules[9].jitter: must be shorter than the interval (every: 5m): with jitter 5m firings would overtake each other`,
		`config.yaml:14: plugins.echo.schedules[10].only_between: invalid window "8-22": "8" is not a time like 08:00`,
		`config.yaml:15: plugins.echo.schedules[11].preferred_window[1]: invalid window "22:00-22:00": it starts where it ends: to allow the whole day, leave the key out`,
		`config.yaml:16: plugins.echo.schedules[12].not_on[0]: "satruday" is not a day: use a day name (saturday, or sat) or 0 (Sunday) to 6: did you mean saturday?`,
		`config.yaml:16: plugins.echo.schedules[12].not_on[1]: day 7 is out of range: use 0 (Sunday) to 6 (Saturday)`,
		`config.yaml:17: plugins.echo.schedules[13].timezone: unknown time zone "Europe/Berln": use an IANA name like Europe/Berlin, America/New_York or UTC, or Local for the daemon's zone`,
		`config.yaml:18: plugins.echo.schedules[14].catch_up: invalid value "runonce": use one of skip, run_once, run_all: did you mean run_once?`,
		`config.yaml:19: plugins.echo.schedules[15].if_running: invalid value "wait": use one of skip, queue, cancel`,
		`config.yaml:20: plugins.echo.schedules[16].jiter: unknown key: did you mean jitter? (valid keys: after, at, catch_up, command, cron, every, id, if_running, jitter, not_on, only_between, payload, preferred_window, timezone)`,
		`config.yaml:21: plugins.echo.schedules[17].not_on: does not apply to a one-shot (at: fires once, at its time): leave it out, or use preferred_window to move the firing into a window`,
		`config.yaml:22: plugins.echo.schedules[18].only_between: does not apply to a one-shot (after: fires once, at its time): leave it out, or use preferred_window to move the firing into a window`,
		`config.yaml:23: plugins.echo.schedules[19].id: id "default" is already used by plugins.echo.schedules[0]: give each entry of a plugin its own id`,
		`config.yaml:24: plugins.echo.schedules[20].catch_up: run_all runs each missed firing, but if_running: skip would skip all but the first: set if_running: queue`,
		`config.yaml:25: plugins.echo.schedules[21].catch_up: run_all runs each missed firing, but if_running: cancel would cancel each for the next: set if_running: queue`,
		`config.yaml:26: plugins.echo.schedules[22].only_between: the entry never fires: no time of cron 0 3 * * * falls inside only_between 08:00-09:00`,
		`config.yaml:27: plugins.echo.schedules[23].not_on: the entry never fires: cron 0 3 * * 6 falls only on days not_on excludes`,
		`config.yaml:28: plugins.echo.schedules[24].not_on: excludes every day of the week, so the entry could never fire: remove a day, or disable the entry's plugin`,
		`config.yaml:29: plugins.echo.schedules[25].id: invalid id "a/b": use letters, digits, '_', '-' and '.' (it names the ledger stream schedule/<plugin>/<id>)`,
		`config.yaml:30: plugins.echo.schedules[26].payload: must be a mapping, handed to the job as its event's payload, e.g. payload: {full: true}`,
		`config.yaml:31: plugins.echo.schedules[27]: empty entry: say when it runs with one of every, cron, at or after, e.g. - every: 5m`,
		`config.yaml:32: plugins.echo.schedules[28].if_running: queue never queues a poll while plugins.echo.max_outstanding_polls is 1 (the poll guard skips it instead): raise max_outstanding_polls to 2 or more, or use skip`,
		`config.yaml:33: plugins.echo.schedules[29].jitter: invalid duration "soon": use a Go duration like 90s, 15m or 2h30m, or days like 7d`,
		`config.yaml:34: plugins.echo.schedules[30].command: must not be empty: leave the key out for the default`,
		`config.yaml:36: plugins.other.schedules: must be a list of schedule entries, e.g. schedules: [{every: 5m}]`,
		`config.yaml:38: plugins.third.max_outstanding_polls: must be ≥ 1, got 0 (how many poll jobs of the plugin may be queued or running at once; the scheduler adds none beyond it)`,
	}, strings.Split(err.Error(), "\n"))
}

// TestSchedulesShow: config show writes each entry with its defaults, in
// the config's own schema, and what it writes loads back the same.
func TestSchedulesShow(t *testing.T) {
	t.Parallel()
	c, err := config.Load(fixture(t, "schedules", "config.yaml"))
	require.NoError(t, err)
	js, err := json.Marshal(c)
	require.NoError(t, err)
	var shown struct {
		Plugins map[string]struct {
			MaxOutstandingPolls int               `json:"max_outstanding_polls"`
			Schedules           []json.RawMessage `json:"schedules"`
		} `json:"plugins"`
	}
	require.NoError(t, json.Unmarshal(js, &shown))
	echo := shown.Plugins["echo"]
	require.Equal(t, 2, echo.MaxOutstandingPolls)
	want := []string{
		`{"id":"default","command":"poll","every":"5m","jitter":"0s","timezone":"Local","catch_up":"skip","if_running":"skip"}`,
		`{"id":"nightly","command":"handle","payload":{"depth":3,"full":true},"cron":"30 2 * * 1-5","jitter":"10m","only_between":["01:00-05:00"],"not_on":["friday","saturday"],"timezone":"Europe/Berlin","catch_up":"run_once","if_running":"cancel"}`,
		`{"id":"windows","command":"poll","every":"hourly","jitter":"0s","preferred_window":["22:00-02:00","12:00-13:00"],"timezone":"Local","catch_up":"run_all","if_running":"queue"}`,
		`{"id":"once","command":"poll","at":"2026-12-01T09:00:00+01:00","jitter":"0s","preferred_window":["08:00-18:00"],"timezone":"Local","catch_up":"skip","if_running":"skip"}`,
		`{"id":"warmup","command":"handle","after":"0s","jitter":"0s","timezone":"UTC","catch_up":"skip","if_running":"skip"}`,
	}
	require.Len(t, echo.Schedules, len(want))
	for i, w := range want {
		require.Equal(t, w, string(echo.Schedules[i]))
	}

	y, err := yaml.Marshal(c)
	require.NoError(t, err)
	require.Contains(t, string(y), `        schedules:
            - id: default
              command: poll
              every: 5m
              jitter: 0s
              timezone: Local
              catch_up: skip
              if_running: skip
            - id: nightly
              command: handle
              payload:
                depth: 3
                full: true
              cron: 30 2 * * 1-5
`)
}
