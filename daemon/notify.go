package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"

	"github.com/ductile/ductile/ledger"
)

// notifier tells systemd how the daemon is doing (sd_notify, for a unit of
// Type=notify): ready once it dispatches, reloading while a reload runs,
// stopping when it drains, and, when the unit sets WatchdogSec, a keep-alive
// every half period for as long as the ledger answers a read. Outside
// systemd ($NOTIFY_SOCKET unset) every call does nothing.
type notifier struct {
	log *slog.Logger
}

func (n notifier) send(state string) {
	if _, err := sd.SdNotify(false, state); err != nil {
		n.log.Warn("tell systemd the daemon's state", "state", state, "err", err)
	}
}

func (n notifier) ready(status string) { n.send(sd.SdNotifyReady + "\nSTATUS=" + status) }

// reloading says a reload began; ready says when it is over (systemd wants
// the monotonic time with it).
func (n notifier) reloading() {
	n.send(fmt.Sprintf("%s\nMONOTONIC_USEC=%d", sd.SdNotifyReloading, monotonicMicros()))
}

func (n notifier) stopping() { n.send(sd.SdNotifyStopping) }

// watchdog pings systemd's watchdog every half of its period until ctx
// ends, each time after the ledger answered a read: a daemon whose disk or
// database hangs stops pinging, and systemd restarts it.
func (n notifier) watchdog(ctx context.Context, l *ledger.Ledger) {
	period, err := sd.SdWatchdogEnabled(false)
	if err != nil {
		n.log.Warn("systemd watchdog settings unreadable: not pinging it", "err", err)
		return
	}
	if period <= 0 {
		return
	}
	t := time.NewTicker(period / 2)
	defer t.Stop()
	for {
		check, cancel := context.WithTimeout(ctx, period/2)
		_, err := l.LastSeq(check)
		cancel()
		if err == nil {
			n.send(sd.SdNotifyWatchdog)
		} else if ctx.Err() == nil {
			n.log.Error("the ledger did not answer: not pinging systemd's watchdog", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// monotonicMicros is CLOCK_MONOTONIC in microseconds, as systemd counts.
func monotonicMicros() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano() / 1000
}
