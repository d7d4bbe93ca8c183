// Package pluginhost finds, validates and runs Ductile plugins.
//
// Its one job is the boundary between the core and plugin processes:
//
//   - Manifest: parse and validate a plugin's manifest.yaml (ParseManifest,
//     LoadManifest). Commands may be written as a map keyed by name or as a
//     list of objects (the form used by plugins written for the reference
//     Ductile). Unknown top-level keys are accepted and kept in
//     Manifest.Extra, so a newer manifest still loads on an older core.
//   - Discovery: scan the configured plugin roots (Discover), apply the
//     trust rules (symlinks must resolve inside an approved root, the
//     entrypoint must be an executable regular file, world-writable
//     directories are refused, ".." in the entrypoint is rejected) and check
//     config_keys.required against the operator's config. A plugin that fails
//     is skipped with one clear error; the others load. On a duplicate name
//     the first root wins and the later copy is reported as shadowed. A
//     plugin its root's .checksums lists (RootChecksumsName: what ductile
//     plugin add pins) must have exactly the files listed there, unchanged.
//     LoadDir validates one directory the same way.
//   - Runner: execute one command of one plugin with protocol v2 (Run):
//     spawn-per-command, one JSON request on stdin, one JSON response on
//     stdout, stderr captured. The runner enforces the timeout (SIGTERM to
//     the process group, a grace period, then SIGKILL), caps stdout (10 MiB)
//     and keeps an excerpt of stderr (its first and last 32 KiB: Excerpt),
//     kills whatever the plugin left behind in its
//     process group, and classifies the outcome (Result.Kind) and whether a
//     failure may be retried (Result.Retryable).
//
// The package decides nothing about jobs, retries or state: it reports what
// happened, and the dispatcher turns that into ledger events.
//
// # Process handling
//
// Each run starts the entrypoint in a new process group (Setpgid) whose id is
// the plugin's pid, with syscall.ForkExec on pipes it owns (no exec.Cmd).
// The goroutine that calls Run does all the rest: the plugin's stdin, stdout
// and stderr and its pidfd are watched by an epoll instance of the run's
// own, itself waited on in the runtime's poller (with the timeout, then the
// grace, as its deadline), so a run starts no goroutine but the one that
// streams its stderr, if it writes any, and its system calls that cannot
// block are made raw. The pidfd becomes readable when the leader exits;
// waitid WNOWAIT then tells so without reaping it (without pidfds, a
// goroutine blocked in waitid closes a pipe instead). Keeping the exited
// leader as a zombie until the group has been sent SIGKILL guarantees the
// process group id cannot have been reused when it is signalled. After the
// leader has exited, pipes still held open by a process that escaped the
// group (setsid) are given up on after RunOptions.WaitDelay, so such a
// process can never delay the result. Every goroutine Run starts has ended
// when Run returns.
//
// # Other Unix systems (the portable path)
//
// The above is the Linux implementation (spawn_linux.go). Every other Unix
// system (macOS) builds spawn_portable.go instead, as Linux does with the
// build tag ductile_portable (go test -tags ductile_portable ./pluginhost
// ./dispatch runs the same tests against it). It keeps every guarantee of
// this page (the new process group, the timeout, SIGTERM then SIGKILL after
// the grace, the group killed when the leader exits, the stdout cap, the
// stderr excerpt, WaitDelay, the control channel on ControlFD, every
// goroutine ended when Run returns), by simpler means, and differs in this:
//
//   - Each run starts goroutines: one reads stdout, one stderr, one the
//     control channel, one writes the request, one waits for the leader
//     (on plain pipes in the runtime's poller; no epoll, no pidfd).
//   - The leader is reaped as soon as it exits (no portable call waits
//     without reaping), before the rest of its group gets SIGKILL. Should
//     the group be empty by then, its id could in principle be reused by a
//     new process group in that instant and be signalled; on Linux the
//     zombie leader rules that out.
//   - RunOptions.Control is called from the control channel's goroutine,
//     not the one that called Run (one line at a time, in order, all
//     before Run returns, as on Linux).
//   - The process's identity (ProcessOf) is read each time: on macOS from
//     the kernel's process table (sysctl kern.proc.pid; its start time in
//     microseconds since the epoch, its boot from kern.bootsessionuuid),
//     not from /proc.
//
// # Control channel
//
// Every plugin process also gets the write end of a pipe as file descriptor
// 3 (ControlFD; its environment says so in DUCTILE_CONTROL_FD, and holds
// its run's id in DUCTILE_RUN_ID and trace id, if any, in DUCTILE_TRACE_ID).
// It may write one JSON object per line there: progress
// ({"progress":0.4,"message":"…","stage":"…"}) and export items
// ({"export":{"type":"text","text":"…"}}). The parent's end is watched by the
// run's epoll instance like stdout and stderr; each line is parsed and
// checked for shape (ParseControlLine) and handed to RunOptions.Control, or
// refused with the reason (over MaxControlLine, not JSON, nothing known in
// it, progress outside [0, 1]…): a bad line never stops the run. The channel
// is read while the plugin runs, then once more without waiting after it
// exits, and closed: a process that outlives the plugin holding it open
// never delays the result. A plugin that ignores the channel runs as it
// always has.
package pluginhost
