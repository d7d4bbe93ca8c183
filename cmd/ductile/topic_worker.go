package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/apiclient"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/topicworker"
)

// setTopicWorker adds the topic mode to `ductile worker` (cmd, a worker
// host of jobs): with --topic it claims messages of a topic, locally on the
// ledger or with --api on a daemon, and runs the command after -- for each.
func setTopicWorker(cmd *cli.Command) {
	cmd.Flags = append(cmd.Flags,
		&cli.StringFlag{Name: "topic", Usage: "topic mode: claim the messages of topic `T` and run the command after -- for each (docs/topics-cli.md)"},
		&cli.StringFlag{Name: "success-topic", Usage: "topic mode: publish the command's stdout to `S` when it exits 0"},
		&cli.StringFlag{Name: "failure-topic", Usage: "topic mode: publish its stderr (else stdout, else \"exited with code N\") to `F` when it fails"},
		&cli.StringFlag{Name: "group", Value: events.DefaultGroup, Usage: "topic mode: the worker `GROUP`: each group gets every message once"},
		&cli.DurationFlag{Name: "lease", Value: topicworker.DefaultLease, Usage: "topic mode: hold a claimed message for `D`, renewed every third of it while the command runs"},
		&cli.DurationFlag{Name: "timeout", Usage: "topic mode: kill the command's process group after `D` and reply on TOPIC.timed_out (default: none)"},
	)
	jobs := cmd.Action
	cmd.Action = func(c *cli.Context) error {
		if c.String("topic") == "" {
			for _, name := range []string{"success-topic", "failure-topic", "group", "lease", "timeout"} {
				if c.IsSet(name) {
					return usagef("--%s goes with --topic T (a topic worker); without it ductile worker claims jobs", name)
				}
			}
			if c.Args().Present() {
				return usagef("a command to run (%q) goes with --topic T: ductile worker --topic T --success-topic S --failure-topic F -- CMD", c.Args().First())
			}
			return jobs(c)
		}
		return topicWorkerRun(c)
	}
}

func topicWorkerRun(c *cli.Context) error {
	switch {
	case c.String("success-topic") == "" || c.String("failure-topic") == "":
		return usagef("a topic worker needs --success-topic S and --failure-topic F")
	case !c.Args().Present():
		return usagef("give the command to run after --: ductile worker --topic %s --success-topic S --failure-topic F -- CMD [ARGS]", c.String("topic"))
	case c.Duration("lease") < time.Second || c.Duration("lease") > time.Hour:
		return usagef("--lease must be 1s to 1h, got %v", c.Duration("lease"))
	case c.Duration("timeout") < 0:
		return usagef("--timeout must be 0 (none) or more, got %v", c.Duration("timeout"))
	}
	for _, name := range []string{"plugins", "plugin", "concurrency"} {
		if c.IsSet(name) {
			return usagef("--%s is for a worker of jobs; a topic worker runs the command after --", name)
		}
	}
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	name := c.String("name")
	if name == "" {
		name = host
	}
	// The instance: two workers of one name on one host stay apart.
	instance := fmt.Sprintf("%s/%d", name, os.Getpid())
	log := e.logger(e.stderr, slog.LevelInfo)
	o := topicworker.Options{
		Topics: topicworker.Topics{Topic: c.String("topic"), Success: c.String("success-topic"), Failure: c.String("failure-topic")},
		Group:  c.String("group"), Worker: instance, Lease: c.Duration("lease"), Once: c.Bool("once"),
		Command:       topicworker.Command{Argv: c.Args().Slice(), Timeout: c.Duration("timeout")},
		ShutdownGrace: c.Duration("grace"), Log: log,
	}
	if base := c.String("api"); base != "" {
		token, err := workerToken(c)
		if err != nil {
			return err
		}
		client, err := apiClientOf(c, base, token)
		if err != nil {
			return err
		}
		o.Exchange, o.Permanent = client, apiclient.Permanent
	} else {
		l, err := e.openLedger(c.Context)
		if err != nil {
			return err
		}
		defer l.Close()
		eng, err := topicEngine(c.Context, e, l)
		if err != nil {
			return err
		}
		o.Exchange = eng
		// Claims read the projections: with no daemon to keep them up to
		// date, this worker does, on every change of the ledger.
		ctx, stop := context.WithCancel(c.Context)
		done := make(chan struct{})
		go func() {
			defer close(done)
			projectUnlessHeld(ctx, e, l, log)
		}()
		defer func() { stop(); <-done }()
	}
	w, err := topicworker.New(o)
	if err != nil {
		return usagef("%v", err)
	}
	log.Info("topic worker started", "topic", o.Topics.Topic, "group", o.Group, "worker", instance, "on", where(c))
	err = w.Run(c.Context)
	handled, failed, dropped := w.Snapshot()
	log.Info("topic worker stopped", "handled", handled, "failed", failed, "dropped", dropped)
	switch {
	case errors.Is(err, topicworker.ErrNoMessage):
		return failf("--once: no message was handled (stopped before one was, or its follow-up was refused; see the log above)")
	case err != nil:
		var tlsErr *apiclient.TLSError
		if errors.As(err, &tlsErr) {
			return withHint(errcode.Error, err, tlsErr.Hint)
		}
		return topicError(err)
	}
	return nil
}

// projectUnlessHeld brings l's projections up to date on every change of
// the ledger, while no process holds the state directory's lock (a daemon
// that would), until ctx ends. Several workers may do so at once: a
// catch-up reads the checkpoint inside its write transaction.
func projectUnlessHeld(ctx context.Context, e *env, l *ledger.Ledger, log *slog.Logger) {
	quiet := e.quietLogger()
	for {
		changed := l.Changed()
		if err := daemon.CatchUpUnlessHeld(ctx, e.stateDir, l, quiet); err != nil && ctx.Err() == nil {
			log.Warn("projections not brought up to date; trying again at the next change", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// where says where a topic worker claims, for its log.
func where(c *cli.Context) string {
	if base := c.String("api"); base != "" {
		return base
	}
	return "the local ledger"
}

// apiClientOf is a client of base with token, trusting --ca.
func apiClientOf(c *cli.Context, base, token string) (*apiclient.Client, error) {
	hc, err := apiclient.NewHTTPClient(apiclient.Options{CAFile: c.String("ca")})
	if err != nil {
		return nil, withHint(errcode.InvalidInput, err, "--ca takes a PEM file of CA certificates (ca.crt, never a key)")
	}
	return apiclient.NewClient(base, token, hc), nil
}
