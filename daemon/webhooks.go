package daemon

import (
	"log/slog"
	"time"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/webhooks"
)

// startWebhooks opens the webhook listener (webhooks.listen) when the
// config has endpoints. Endpoints, secrets and job defaults are read per
// request, so a reload changes them; the listen address and whether the
// listener runs at all are fixed at start.
func (d *Daemon) startWebhooks(cfg *config.Config, secrets func() auth.Secrets, log *slog.Logger) error {
	if len(cfg.WebhookSettings.Endpoints) == 0 {
		return nil
	}
	if secrets == nil {
		secrets = func() auth.Secrets { return d.Engine().Auth() }
	}
	for _, e := range cfg.WebhookSettings.Endpoints {
		if s := secrets(); s == nil || !defined(s, e.SecretRef) {
			d.log.Error("webhook endpoint has no secret: every delivery to it is refused", "path", e.Path, "secret_ref", e.SecretRef,
				"fix", "define the secret it names, then reload")
		}
	}
	h := webhooks.New(webhooks.Options{
		Ledger:  d.Ledger,
		Secrets: secrets,
		Config:  d.Config,
		CanRun:  d.canRun,
		Health: func() webhooks.Health {
			return webhooks.Health{Started: d.started, PluginsLoaded: d.pluginsRunning(), API: d.apiState}
		},
		Logger: log,
		Now:    time.Now,
	})
	s, err := webhooks.Listen(cfg.WebhookSettings.Listen, h, log)
	if err != nil {
		return err
	}
	d.Webhooks = s
	d.log.Info("webhooks listening", "addr", s.Addr(), "endpoints", len(cfg.WebhookSettings.Endpoints))
	return nil
}

// canRun says whether the daemon can run plugin's command now, as a front
// door (webhook, API) must know before it accepts the job: loaded, enabled
// and with that command in the config applied, and its entrypoint still an
// executable file (pluginhost.Plugin.Runnable: a chmod -x or a removal
// since the plugin was loaded). Else a *commands.TargetError says why.
func (d *Daemon) canRun(plugin, command string) error {
	e := d.Engine()
	p, err := commands.TargetPlugin(e.Applied(), plugin)
	if err != nil {
		return err
	}
	if _, err := commands.TargetCommand(p, command); err != nil {
		return err
	}
	if loaded, ok := e.Plugins().Get(plugin); ok {
		if err := loaded.Runnable(); err != nil {
			return &commands.TargetError{Kind: commands.ErrPluginUnrunnable, Plugin: plugin, Reason: err.Error()}
		}
	}
	return nil
}

func defined(s auth.Secrets, name string) bool {
	v, ok := s.Secret(name)
	return ok && len(v) > 0
}

// pluginsRunning counts the plugins the daemon runs now: loaded and
// enabled (a /healthz's plugins_loaded).
func (d *Daemon) pluginsRunning() int {
	n := 0
	for _, p := range d.Engine().Applied().Plugins {
		if p.Enabled {
			n++
		}
	}
	return n
}
