package daemon

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/views"
)

// CheckRemote says which registered workers (fleet: views.ReadFleet)
// serve each enabled plugin cfg places runs_on: remote or any, and warns
// of each such plugin whose jobs nothing can run: placed remote (or any,
// and not installed here, as installed says) with no registered worker
// serving it. Not an error: a worker may register later, and until then
// its jobs wait queued.
func CheckRemote(cfg *config.Config, installed func(string) bool, fleet []views.FleetWorker, now time.Time) ([]views.RemotePlugin, []string) {
	placed := map[string]string{}
	for name, p := range cfg.Plugins {
		if p.Enabled && p.RunsOn.Remote() {
			placed[name] = string(p.RunsOn)
		}
	}
	plugins := views.RemotePlugins(fleet, placed, installed, now)
	warnings := []string{}
	for _, p := range plugins {
		if p.Served() {
			continue
		}
		why := "no registered worker serves it"
		if p.RunsOn != "remote" {
			why = "it is not installed here and " + why
		}
		warnings = append(warnings, fmt.Sprintf("plugins.%s: runs_on: %s, but %s, so its jobs wait queued until one does: "+
			"on a machine that has the plugin, run: ductile worker --api %s --plugin %s (with a token of scope worker; docs/remote-workers.md)",
			p.Plugin, p.RunsOn, why, APIURL(cfg.APIServer), p.Plugin))
	}
	return plugins, warnings
}

// APIURL is the address a worker calls the API by, as well as the config
// says it: https with api.tls; the first of api.hosts, else the listen
// address (an unspecified one, 0.0.0.0 or [::], is left as HOST for the
// user to fill in).
func APIURL(s config.APIServer) string {
	scheme := "http"
	if s.TLS.On() {
		scheme = "https"
	}
	host, port, err := net.SplitHostPort(s.Listen)
	if err != nil {
		return scheme + "://" + s.Listen
	}
	switch {
	case len(s.Hosts) > 0:
		host = s.Hosts[0]
	case host == "" || host == "0.0.0.0" || host == "::":
		host = "HOST"
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host + ":" + port
}
