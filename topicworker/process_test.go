package topicworker_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/topicworker"
)

func sh(script string) topicworker.Command {
	return topicworker.Command{Argv: []string{"sh", "-c", script}, Env: []string{"PATH=" + os.Getenv("PATH")}}
}

func TestRunPassesBodyAndMetadata(t *testing.T) {
	t.Parallel()
	c := sh(`cat; echo; echo "a=$DUCTILE_META_A_B n=$DUCTILE_META_N o=$DUCTILE_META_OBJ id=$DUCTILE_MESSAGE_ID"`)
	r := c.Run(context.Background(), topicworker.Input{
		Body:     "hello\nworld",
		Metadata: json.RawMessage(`{"a-b":"x y","n":3,"obj":{"k":[1,2]}}`),
		Vars:     map[string]string{"DUCTILE_MESSAGE_ID": "m1"},
	})
	require.NoError(t, r.StartErr)
	require.Equal(t, 0, r.ExitCode)
	require.Equal(t, "hello\nworld\na=x y n=3 o={\"k\":[1,2]} id=m1\n", r.Stdout)
	f := topicworker.FollowUpOf(r, topicworker.Topics{Topic: "t", Success: "ok", Failure: "bad"})
	require.Equal(t, topicworker.FollowUp{Status: topicworker.StatusCompleted, Topic: "ok", Body: r.Stdout}, f)
}

func TestMetaEnvNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, "DUCTILE_META_REPLY_TO_2", topicworker.MetaEnvName("reply.to-2"))
	require.Equal(t, "DUCTILE_META___", topicworker.MetaEnvName("ä!"), "a character outside A-Z and 0-9 is _, even a letter")
	env, err := topicworker.MetaEnv(json.RawMessage(`{"s":"a\u0000b","t":true,"z":null}`))
	require.NoError(t, err)
	require.Equal(t, []string{"DUCTILE_META_S=ab", "DUCTILE_META_T=true", "DUCTILE_META_Z=null"}, env)
	_, err = topicworker.MetaEnv(json.RawMessage(`[1]`))
	require.Error(t, err)
	env, err = topicworker.MetaEnv(nil)
	require.NoError(t, err)
	require.Empty(t, env)
}

func TestRunFailureMapping(t *testing.T) {
	t.Parallel()
	topics := topicworker.Topics{Topic: "t", Success: "ok", Failure: "bad"}
	cases := []struct {
		script, body string
	}{
		{`echo out; echo err >&2; exit 3`, "err\n"},
		{`echo out; exit 4`, "out\n"},
		{`exit 5`, "exited with code 5"},
	}
	for _, tc := range cases {
		r := sh(tc.script).Run(context.Background(), topicworker.Input{})
		f := topicworker.FollowUpOf(r, topics)
		require.Equal(t, topicworker.StatusFailed, f.Status, tc.script)
		require.Equal(t, "bad", f.Topic)
		require.Equal(t, tc.body, f.Body, tc.script)
	}
	r := topicworker.Command{Argv: []string{filepath.Join(t.TempDir(), "missing")}}.Run(context.Background(), topicworker.Input{})
	require.Error(t, r.StartErr)
	f := topicworker.FollowUpOf(r, topics)
	require.Equal(t, "bad", f.Topic)
	require.Contains(t, f.Body, "missing")
}

// alive reports whether a process pid exists (signal 0).
func alive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestRunTimeoutKillsTheWholeGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild")
	// The child forks a grandchild that ignores SIGTERM and sleeps, then
	// sleeps itself.
	c := sh(`sh -c 'trap "" TERM; echo $$ > ` + pidFile + `.tmp; mv ` + pidFile + `.tmp ` + pidFile + `; exec sleep 60' & echo started; sleep 60`)
	c.Timeout, c.KillGrace = 300*time.Millisecond, 200*time.Millisecond
	r := c.Run(context.Background(), topicworker.Input{})
	require.True(t, r.TimedOut)
	require.Less(t, r.Duration, 300*time.Millisecond+200*time.Millisecond+time.Second, "the group is killed promptly")
	require.Equal(t, "started\n", r.Stdout)
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	// The grandchild was SIGKILLed with its group; its parent (sh, dead)
	// leaves it to init, which reaps it: wait for it to go.
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.False(t, alive(pid), "grandchild %d survived the timeout", pid)
	f := topicworker.FollowUpOf(r, topicworker.Topics{Topic: "t", Success: "ok", Failure: "bad"})
	require.Equal(t, topicworker.StatusTimedOut, f.Status)
	require.Equal(t, "t.timed_out", f.Topic)
}

func TestRunLeftoverProcessesDieWithTheCommand(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "bg")
	// The command exits at once, leaving a sleeper that holds stdout.
	c := sh(`sleep 60 & echo $! > ` + pidFile + `; echo done`)
	r := c.Run(context.Background(), topicworker.Input{})
	require.Equal(t, 0, r.ExitCode)
	require.Equal(t, "done\n", r.Stdout)
	require.Less(t, r.Duration, topicworker.DefaultDrainDelay, "the pipes closed with the group, not after the drain delay")
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.False(t, alive(pid))
}

func TestRunInterruptKillsAndSaysSo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	c := sh(`echo go; exec sleep 60`)
	done := make(chan topicworker.Result)
	go func() { done <- c.Run(ctx, topicworker.Input{}) }()
	cancel()
	r := <-done
	require.True(t, r.Interrupted)
	require.False(t, r.TimedOut)
	require.Equal(t, topicworker.StatusFailed, topicworker.FollowUpOf(r, topicworker.Topics{Failure: "bad"}).Status)
}

func TestRunBoundsOutput(t *testing.T) {
	t.Parallel()
	c := sh(`head -c 5000 /dev/zero | tr '\0' a; head -c 3000 /dev/zero | tr '\0' b >&2; exit 1`)
	c.MaxOutput = 1000
	r := c.Run(context.Background(), topicworker.Input{Body: strings.Repeat("x", 1<<20)}) // not read: EPIPE ignored
	require.EqualValues(t, 5000, r.StdoutBytes)
	require.EqualValues(t, 3000, r.StderrBytes)
	require.True(t, strings.HasPrefix(r.Stdout, strings.Repeat("a", 1000)+"\n[ductile: output truncated: the first 1000 of 5000 bytes kept]"))
	require.True(t, strings.HasPrefix(r.Stderr, strings.Repeat("b", 1000)+"\n[ductile: output truncated"))
	require.LessOrEqual(t, len(topicworker.FollowUpOf(r, topicworker.Topics{}).Body), 1000+100)
	// The default bound leaves room for the note within a 1 MiB body.
	require.LessOrEqual(t, topicworker.DefaultMaxOutput+len("\n[ductile: output truncated: the first 1048320 of 99999999999 bytes kept]\n"), 1<<20)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
