package pluginhost_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ductile/ductile/pluginhost"
)

func ExampleRun() {
	// bundledRoot holds the bundled plugins (plugins.Unpack).
	reg, errs := pluginhost.Discover([]string{bundledRoot}, pluginhost.DiscoverOptions{})
	if len(errs) > 0 {
		fmt.Println(errs)
		return
	}
	echo, _ := reg.Get("echo")

	res := pluginhost.Run(context.Background(), echo, pluginhost.Request{
		JobID:   "job-1",
		Command: "handle",
		State:   json.RawMessage(`{"runs":4}`),
		Event:   json.RawMessage(`{"type":"note.added","payload":{"text":"hi"}}`),
	}, pluginhost.RunOptions{Timeout: 10 * time.Second})

	fmt.Println(res.Kind, res.Response.Result)
	for _, e := range res.Response.Events {
		fmt.Println(e.Type, string(e.Payload))
	}
	fmt.Println(string(res.Response.StateUpdates))
	// Output:
	// ok echo handle
	// echo.handle {"text":"hi"}
	// {"last_command":"handle","runs":5}
}

func ExampleRun_failure() {
	reg, _ := pluginhost.Discover([]string{bundledRoot}, pluginhost.DiscoverOptions{})
	echo, _ := reg.Get("echo")

	res := pluginhost.Run(context.Background(), echo, pluginhost.Request{
		JobID:   "job-2",
		Command: "poll",
		Config:  json.RawMessage(`{"mode":"crash"}`),
	}, pluginhost.RunOptions{})

	fmt.Println(res.Kind, res.ExitCode, res.Retryable)
	fmt.Println(res.Err)
	// Output:
	// error 3 true
	// exit 3: echo: crashing on purpose (mode=crash)
}
