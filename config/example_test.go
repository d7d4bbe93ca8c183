package config_test

import (
	"fmt"

	"github.com/ductile/ductile/config"
)

// Load merges config.yaml with everything it includes; later files win and
// routes concatenate in load order.
func ExampleLoad() {
	c, err := config.Load("testdata/include/config.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("files:", len(c.Files))
	fmt.Println("max_workers:", c.Service.MaxWorkers)
	fmt.Println("echo retry:", c.Plugin("echo").Retry.MaxAttempts, c.Plugin("echo").Retry.BackoffBase)
	fmt.Println("notify handle timeout:", c.Timeout("notify", "handle")) // not configured: defaults
	for _, r := range c.Routes {
		fmt.Printf("route: %s %s → %s.%s\n", r.From, r.EventType, r.To, r.Command)
	}
	// Output:
	// files: 5
	// max_workers: 7
	// echo retry: 2 1m0s
	// notify handle timeout: 2m0s
	// route: main main.event → sink.handle
	// route: base base.event → sink.handle
	// route: deeper deeper.event → sink.handle
	// route: first first.event → sink.sync
	// route: second second.event → sink.handle
}

// A broken config reports every problem at once, one per line.
func ExampleValidationError() {
	_, err := config.Load("testdata/negative-workers/config.yaml")
	fmt.Println(err)
	// Output:
	// config.yaml:2: service.max_workers: must be ≥ 1, got -3 (1 runs one job at a time; leave it out for the default)
}
