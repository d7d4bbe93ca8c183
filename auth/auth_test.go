package auth_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/auth"
)

func TestGrants(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		granted []auth.Scope
		need    auth.Scope
		ok      bool
	}{
		{[]auth.Scope{auth.All}, auth.PluginRW, true},
		{[]auth.Scope{auth.PluginRW}, auth.PluginRO, true},
		{[]auth.Scope{auth.PluginRO}, auth.PluginRW, false},
		{[]auth.Scope{auth.JobsRW}, auth.PluginRO, false},
		{[]auth.Scope{auth.EventsRO}, auth.EventsRO, true},
		{nil, auth.JobsRO, false},
	} {
		require.Equal(t, tc.ok, auth.Grants(tc.granted, tc.need), "%v needs %s", tc.granted, tc.need)
	}
}

func TestWorkerPlugins(t *testing.T) {
	t.Parallel()
	plugins, limited := auth.WorkerPlugins([]auth.Scope{"worker:plugin=a", auth.JobsRO, "worker:plugin=b", "worker:plugin=a"})
	require.True(t, limited)
	require.Equal(t, []string{"a", "b"}, plugins)
	require.True(t, auth.Grants([]auth.Scope{"worker:plugin=a"}, auth.Worker))
	require.False(t, auth.Grants([]auth.Scope{"worker:plugin=a"}, auth.JobsRO))
	_, limited = auth.WorkerPlugins([]auth.Scope{"worker:plugin=a", auth.All})
	require.False(t, limited)
	_, limited = auth.WorkerPlugins([]auth.Scope{auth.JobsRW})
	require.False(t, limited)
}
