package daemon

import (
	"log/slog"
	"time"

	"github.com/ductile/ductile/auth"
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
		secrets = func() auth.Secrets { return d.apiTokens() }
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
		Engine:  d.Engine,
		Health: func() webhooks.Health {
			return webhooks.Health{Started: d.started, API: d.apiState}
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

func defined(s auth.Secrets, name string) bool {
	v, ok := s.Secret(name)
	return ok && len(v) > 0
}
