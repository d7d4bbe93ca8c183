package views_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/views"
)

// TestReadBaggage: a routed step's context beside its parent's, with the
// dotted paths it added (a new leaf, a new nested object's leaves, a
// changed value); a root's parent context is {}.
func TestReadBaggage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	root, _ := b.child(t, "fetch", "", "", `{"web":{"url":"u"},"n":1}`, 1)
	step, _ := b.child(t, "transcribe", root, root, `{"web":{"url":"u","lang":"en"},"n":2,"whisper":{"model":"small","opts":{}},"same":[1,2]}`, 1)

	got, err := views.ReadBaggage(b.ctx, b.l, step)
	require.NoError(t, err)
	require.JSONEq(t, `{"web":{"url":"u"},"n":1}`, string(got.ParentContext))
	require.Equal(t, []string{"n", "same", "web.lang", "whisper.model", "whisper.opts"}, got.AddedPaths)

	got, err = views.ReadBaggage(b.ctx, b.l, root)
	require.NoError(t, err)
	require.JSONEq(t, `{}`, string(got.ParentContext))
	require.Equal(t, []string{"n", "web.url"}, got.AddedPaths)

	plain := b.enqueue(t, "other", 1)
	got, err = views.ReadBaggage(b.ctx, b.l, plain)
	require.NoError(t, err)
	out, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, `{"context":{},"parent_context":{},"added_paths":[]}`, string(out), "no baggage")

	_, err = views.ReadBaggage(b.ctx, b.l, "nope")
	require.ErrorIs(t, err, views.ErrJobNotFound)
}

// TestAddedPaths: the same value spelled differently is not added.
func TestAddedPaths(t *testing.T) {
	t.Parallel()
	added, err := views.AddedPaths(json.RawMessage(`{"a":{"b":1.0,"c":[1, 2]}}`), json.RawMessage(`{"a":{"b":1,"c":[1,2],"d":null}}`))
	require.NoError(t, err)
	require.Equal(t, []string{"a.d"}, added)
	_, err = views.AddedPaths(json.RawMessage(`[1]`), json.RawMessage(`{}`))
	require.ErrorContains(t, err, "parent context: not a JSON object")
}
