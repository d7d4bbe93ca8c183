package daemon_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/views"
)

// CheckRemote lists, for each enabled plugin placed remote or any, the
// registered workers that serve it with their claims and whether their
// leases are live, and warns (with the command to run) of each whose jobs
// nothing can run: remote with no worker, any with no worker and not
// installed here.
func TestCheckRemote(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 22, 0, 0, 0, time.UTC)
	cfg := config.Default()
	cfg.APIServer.Listen = "0.0.0.0:8443"
	cfg.APIServer.Hosts = []string{"ductile.home.example"}
	cfg.APIServer.TLS = config.APITLS{CertFile: "/c", KeyFile: "/k"}
	place := func(name string, on config.RunsOn, enabled bool) {
		p := config.DefaultPlugin()
		p.RunsOn, p.Enabled = on, enabled
		cfg.Plugins[name] = p
	}
	place("render", config.RunsRemote, true)   // served by gpu1 (live) and gpu2 (its lease ran out)
	place("ocr", config.RunsRemote, true)      // served by none
	place("resize", config.RunsAny, true)      // installed here: fine without a worker
	place("transcode", config.RunsAny, true)   // not installed here, no worker
	place("archive", config.RunsRemote, false) // disabled: left out
	place("echo", config.RunsLocal, true)      // local: left out

	fleet := []views.FleetWorker{
		{Name: "gpu1", Host: "gpu1.lan", Plugins: []string{"render", "thumbs"}, LastSeen: "2026-12-07T21:59:50.000Z", Claims: 2, Leases: []views.FleetLease{
			{JobID: "a", Plugin: "render", LeaseUntil: "2026-12-07T22:00:20Z"},
			{JobID: "b", Plugin: "thumbs", LeaseUntil: "2026-12-07T22:00:25Z"}}},
		{Name: "gpu2", Host: "gpu2.lan", Plugins: []string{"render"}, LastSeen: "2026-12-07T21:50:00.000Z", Claims: 1, Leases: []views.FleetLease{
			{JobID: "c", Plugin: "render", LeaseUntil: "2026-12-07T21:59:00Z"}}},
	}
	plugins, warnings := daemon.CheckRemote(cfg, func(name string) bool { return name == "resize" }, fleet, now)
	require.Equal(t, []views.RemotePlugin{
		{Plugin: "ocr", RunsOn: "remote", Workers: []views.RemoteServer{}},
		{Plugin: "render", RunsOn: "remote", Workers: []views.RemoteServer{
			{Name: "gpu1", Host: "gpu1.lan", LastSeen: "2026-12-07T21:59:50.000Z", Claims: 1, LiveClaims: 1, Live: true},
			{Name: "gpu2", Host: "gpu2.lan", LastSeen: "2026-12-07T21:50:00.000Z", Claims: 1, LiveClaims: 0, Live: false}}},
		{Plugin: "resize", RunsOn: "any", Installed: true, Workers: []views.RemoteServer{}},
		{Plugin: "transcode", RunsOn: "any", Workers: []views.RemoteServer{}},
	}, plugins)
	require.Equal(t, []string{
		"plugins.ocr: runs_on: remote, but no registered worker serves it, so its jobs wait queued until one does: " +
			"on a machine that has the plugin, run: ductile worker --api https://ductile.home.example:8443 --plugin ocr (with a token of scope worker; docs/remote-workers.md)",
		"plugins.transcode: runs_on: any, but it is not installed here and no registered worker serves it, so its jobs wait queued until one does: " +
			"on a machine that has the plugin, run: ductile worker --api https://ductile.home.example:8443 --plugin transcode (with a token of scope worker; docs/remote-workers.md)",
	}, warnings)

	for listen, want := range map[string]string{"127.0.0.1:8080": "http://127.0.0.1:8080", "0.0.0.0:8080": "http://HOST:8080", "[::1]:9": "http://[::1]:9"} {
		require.Equal(t, want, daemon.APIURL(config.APIServer{Listen: listen}))
	}
}
