package pluginhost

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// The spawn of a plugin's process has two implementations: spawn_linux.go
// (pidfd and epoll, the default on Linux) and spawn_portable.go (os-level
// pipes and goroutines, for other Unix systems, and on Linux with the
// build tag ductile_portable so its tests run here). What both share is
// below: the child's environment, the group signal and the reaping.

// childEnv is the environment os/exec gives a command with Dir set and
// Env nil: the parent's with PWD set to dir, each name once (its last
// value), entries not of the form name=value kept as they are, empty ones
// dropped; and the control channel's: EnvControlFD set, EnvRunID and
// EnvTraceID left out (runEnv adds the run's). The one made for dir is
// reused while the parent's environment stays the same.
func childEnv(dir string) ([]string, error) {
	env := os.Environ()
	childEnvs.Lock()
	defer childEnvs.Unlock()
	if made, ok := childEnvs.of[dir]; ok && slices.Equal(env, made.parent) {
		return made.child, nil
	}
	pwd, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	all := append(slices.Clip(env), "PWD="+pwd, controlFDEnv)
	seen := make(map[string]struct{}, len(all))
	child := make([]string, len(all))
	j := len(child)
	for i := len(all) - 1; i >= 0; i-- {
		kv := all[i]
		if kv == "" {
			continue
		}
		eq := strings.IndexByte(kv, '=')
		if eq == 0 { // a name starting with "=", as Windows has
			eq = strings.IndexByte(kv[1:], '=') + 1
		}
		if eq > 0 {
			if _, dup := seen[kv[:eq]]; dup || kv[:eq] == EnvRunID || kv[:eq] == EnvTraceID {
				continue
			}
			seen[kv[:eq]] = struct{}{}
		}
		j--
		child[j] = kv
	}
	if childEnvs.of == nil {
		childEnvs.of = make(map[string]madeEnv)
	}
	childEnvs.of[dir] = madeEnv{parent: env, child: child[j:]}
	return child[j:], nil
}

// controlFDEnv tells a plugin where its control channel is.
var controlFDEnv = EnvControlFD + "=" + strconv.Itoa(ControlFD)

// runEnv is env with the run's id and trace id added (each if set), in a
// slice of envs (env is shared by every run of its plugin), held by pooled
// (nil: none) until releaseEnv gives it back, once the process is spawned.
func runEnv(env []string, runID, traceID string) (run []string, pooled *[]string) {
	if runID == "" && traceID == "" {
		return env, nil
	}
	pooled = envs.Get().(*[]string)
	run = append((*pooled)[:0], env...)
	if runID != "" {
		run = append(run, EnvRunID+"="+runID)
	}
	if traceID != "" {
		run = append(run, EnvTraceID+"="+traceID)
	}
	*pooled = run
	return run, pooled
}

// releaseEnv gives back a slice of runEnv.
func releaseEnv(pooled *[]string) {
	if pooled != nil {
		clear(*pooled) // holds no strings while pooled
		*pooled = (*pooled)[:0]
		envs.Put(pooled)
	}
}

// envs are the slices of runEnv, reused: the environment is copied for
// each run, and is read only until the process is spawned.
var envs = sync.Pool{New: func() any { return new([]string) }}

// childEnvs are the environments childEnv made, by plugin directory.
var childEnvs struct {
	sync.Mutex
	of map[string]madeEnv
}

// madeEnv is a child's environment (never changed once made: a spawn may
// be using it), and the parent's it was made from.
type madeEnv struct{ parent, child []string }

// signal sends sig to the plugin's process group. ESRCH (nobody left) is
// expected and ignored.
func (pr *process) signal(sig syscall.Signal) {
	_ = syscall.Kill(-pr.pid, sig)
}

// reap reaps pid, which has exited.
func reap(pid int) (status syscall.WaitStatus, ok bool) {
	for {
		got, err := syscall.Wait4(pid, &status, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err == nil && got == 0 {
			// Not exited after all: never, but then wait for it.
			_, err = syscall.Wait4(pid, &status, 0, nil)
		}
		return status, err == nil
	}
}
