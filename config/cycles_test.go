package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
)

func TestRouteCycles(t *testing.T) {
	t.Parallel()
	r := func(from, to string) config.Route {
		return config.Route{From: from, EventType: "e", To: to, Command: "handle"}
	}
	for _, tc := range []struct {
		name   string
		routes []config.Route
		want   [][]string
	}{
		{name: "none", routes: nil, want: nil},
		{name: "chain", routes: []config.Route{r("a", "b"), r("b", "c")}, want: nil},
		{name: "self", routes: []config.Route{r("a", "a")}, want: [][]string{{"a", "a"}}},
		{name: "two", routes: []config.Route{r("b", "a"), r("a", "b")}, want: [][]string{{"a", "b", "a"}}},
		{name: "three", routes: []config.Route{r("c", "a"), r("a", "b"), r("b", "c"), r("b", "d")}, want: [][]string{{"a", "b", "c", "a"}}},
		{name: "two routes, one edge", routes: []config.Route{r("a", "b"), r("a", "b"), r("b", "a")}, want: [][]string{{"a", "b", "a"}}},
		{name: "overlapping", routes: []config.Route{r("a", "b"), r("b", "a"), r("b", "c"), r("c", "b"), r("c", "c")},
			want: [][]string{{"a", "b", "a"}, {"b", "c", "b"}, {"c", "c"}}},
		{name: "diamond back", routes: []config.Route{r("a", "b"), r("a", "c"), r("b", "d"), r("c", "d"), r("d", "a")},
			want: [][]string{{"a", "b", "d", "a"}, {"a", "c", "d", "a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := config.Default()
			c.Routes = tc.routes
			require.Equal(t, tc.want, c.RouteCycles())
		})
	}
}

// TestCheckWarnsOfRouteCycles: config check names each cycle at its first
// route, as a warning (a cycle may be meant: the depth limit stops it).
func TestCheckWarnsOfRouteCycles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`service: {max_route_depth: 5}
routes:
  - {from: a, event_type: x, to: b}
  - {from: b, event_type: y, to: a}
  - {from: c, event_type: z, to: c}
`), 0o600))
	c, err := config.Load(path)
	require.NoError(t, err)
	installed := map[string]config.InstalledPlugin{"a": {Commands: []string{"handle"}}, "b": {Commands: []string{"handle"}}, "c": {Commands: []string{"handle"}}}
	errs, warnings := c.Check(installed, nil)
	require.Empty(t, errs)
	var got []string
	for _, w := range warnings {
		got = append(got, w.Error())
	}
	require.Equal(t, []string{
		"config.yaml:3: routes[0]: route cycle a -> b -> a: a job may route back to a plugin it came from; service.max_route_depth (5) stops such a chain",
		"config.yaml:5: routes[2]: route cycle c -> c: a job may route back to a plugin it came from; service.max_route_depth (5) stops such a chain",
	}, got)
}
