package config

import (
	"io/fs"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFilePermissionDecision: the owner and mode decisions, with the
// effective uid injected (tests cannot chown without root).
func TestFilePermissionDecision(t *testing.T) {
	t.Parallel()
	const me = 1000
	for _, tc := range []struct {
		name         string
		stat         fileStat
		refuse, warn string
	}{
		{name: "mine 0600", stat: fileStat{mode: 0o600, uid: me, ok: true}},
		{name: "root's 0600", stat: fileStat{mode: 0o600, uid: 0, ok: true}},
		{name: "another user's 0600", stat: fileStat{mode: 0o600, uid: 1001, ok: true}, refuse: "is owned by user 1001, not by the user ductile runs as (1000) or root"},
		{name: "another user's 0644", stat: fileStat{mode: 0o644, uid: 1001, ok: true}, refuse: "is owned by user 1001"},
		{name: "mine 0620", stat: fileStat{mode: 0o620, uid: me, ok: true}, refuse: "may be written by its group (mode 0620)"},
		{name: "mine 0644", stat: fileStat{mode: 0o644, uid: me, ok: true}, warn: "may be read by its group and others (mode 0644)"},
	} {
		refuse, warn := filePermissionProblem("/c/tokens.yaml", tc.stat, me)
		if tc.refuse == "" {
			require.Empty(t, refuse, tc.name)
		} else {
			require.Contains(t, refuse, tc.refuse, tc.name)
		}
		if tc.warn == "" {
			require.Empty(t, warn, tc.name)
		} else {
			require.Contains(t, warn, tc.warn, tc.name)
		}
	}
	for _, tc := range []struct {
		name   string
		stat   fileStat
		refuse string
	}{
		{name: "mine 0755", stat: fileStat{mode: fs.ModeDir | 0o755, uid: me, ok: true}},
		{name: "root's 0755", stat: fileStat{mode: fs.ModeDir | 0o755, uid: 0, ok: true}},
		{name: "another user's 0755", stat: fileStat{mode: fs.ModeDir | 0o755, uid: 1001, ok: true}, refuse: "is owned by user 1001"},
		{name: "mine 0775", stat: fileStat{mode: fs.ModeDir | 0o775, uid: me, ok: true}, refuse: "may be written by its group (mode 0775)"},
		{name: "mine 0757", stat: fileStat{mode: fs.ModeDir | 0o757, uid: me, ok: true}, refuse: "may be written by others (mode 0757)"},
		{name: "root's sticky 1777 (/tmp)", stat: fileStat{mode: fs.ModeDir | fs.ModeSticky | 0o777, uid: 0, ok: true}},
		{name: "another user's sticky 1777", stat: fileStat{mode: fs.ModeDir | fs.ModeSticky | 0o777, uid: 1001, ok: true}, refuse: "is owned by user 1001"},
	} {
		refuse := dirPermissionProblem("/c", tc.stat, me)
		if tc.refuse == "" {
			require.Empty(t, refuse, tc.name)
		} else {
			require.Contains(t, refuse, tc.refuse, tc.name)
		}
	}
}
