package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
)

// TestListJobsPages pages through 250 jobs 100 at a time: newest first,
// each job once, two full pages and a last one of 50 with no next cursor.
func TestListJobsPages(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	enqueued := map[string]bool{}
	for range 250 {
		res, err := commands.EnqueueJob(ctx, f.l, commands.JobFor(config.Default(), "echo", "poll", events.ActorAPI))
		require.NoError(t, err)
		enqueued[res.JobID] = true
	}
	f.waitProjected()

	seen := map[string]bool{}
	var sizes []int
	lastSeq := int64(1) << 62
	cursor := ""
	for page := 0; ; page++ {
		require.Less(t, page, 4, "paging does not end")
		path := "/jobs?limit=100"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		r := f.do("GET", path, "jobs-ro", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		jobs := r.body["jobs"].([]any)
		sizes = append(sizes, len(jobs))
		for _, j := range jobs {
			job := j.(map[string]any)
			id, seq := job["job_id"].(string), int64(job["seq"].(float64))
			require.False(t, seen[id], "job %s on two pages", id)
			require.Less(t, seq, lastSeq, "not newest first")
			seen[id], lastSeq = true, seq
		}
		next, _ := r.body["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	require.Equal(t, []int{100, 100, 50}, sizes)
	require.Equal(t, enqueued, seen)

	// A filter holds across pages; a cursor the API did not give is refused.
	r := f.do("GET", "/jobs?status=queued&limit=200", "jobs-ro", nil)
	require.Len(t, r.body["jobs"], 200)
	r = f.do("GET", "/jobs?status=queued&limit=200&cursor="+url.QueryEscape(r.body["next_cursor"].(string)), "jobs-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Len(t, r.body["jobs"], 50)
	require.Nil(t, r.body["next_cursor"])
	for _, bad := range []string{"12", "c2VxOi0x", "!!"} { // not base64, seq:-1, not base64url
		requireError(t, f.do("GET", "/jobs?cursor="+url.QueryEscape(bad), "jobs-ro", nil), 400, "invalid_input")
	}
}

// TestJobTree builds root → a, b; a → a1; a1 → a11, and an unrelated job:
// the tree of any of its jobs is all five, the root first; with a cap it
// is cut, nearest the root first, and says so.
func TestJobTree(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	enqueue := func(parent, correlation string, depth int) string {
		job := commands.JobFor(config.Default(), "echo", "handle", events.ActorAPI)
		job.ParentJobID, job.Correlation, job.Depth = parent, correlation, depth
		res, err := commands.EnqueueJob(ctx, f.l, job)
		require.NoError(t, err)
		return res.JobID
	}
	root := enqueue("", "", 0)
	other := enqueue("", "", 0)
	a := enqueue(root, root, 1)
	b := enqueue(root, root, 1)
	a1 := enqueue(a, root, 2)
	a11 := enqueue(a1, root, 3)
	f.waitProjected()

	ids := func(r response) []string {
		var out []string
		for _, j := range r.body["jobs"].([]any) {
			out = append(out, j.(map[string]any)["job_id"].(string))
		}
		return out
	}
	whole := []string{root, a, b, a1, a11} // enqueue order
	for _, id := range whole {
		r := f.do("GET", "/job/"+id+"/tree", "jobs-ro", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, id, r.body["job_id"])
		require.Equal(t, root, r.body["root_job_id"])
		require.Equal(t, whole, ids(r))
		require.Equal(t, false, r.body["truncated"])
	}
	r := f.do("GET", "/job/"+other+"/tree", "jobs-ro", nil)
	require.Equal(t, []string{other}, ids(r))

	// Breadth first: the root and its children before a1 and a11.
	r = f.do("GET", fmt.Sprintf("/job/%s/tree?limit=3", a11), "jobs-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, []string{root, a, b}, ids(r))
	require.Equal(t, true, r.body["truncated"])
	r = f.do("GET", "/job/"+root+"/tree?limit=5", "jobs-ro", nil)
	require.Equal(t, false, r.body["truncated"])
	requireError(t, f.do("GET", "/job/"+root+"/tree?limit=0", "jobs-ro", nil), 400, "invalid_input")

	// A retry of the root shares its correlation but is a root of its own.
	_, err := commands.CancelJob(ctx, f.l, commands.Cancel{JobID: root, Reason: "test", Actor: events.ActorAPI})
	require.NoError(t, err)
	f.waitProjected()
	r = f.do("POST", "/job/"+root+"/retry", "jobs-rw", nil)
	require.Equal(t, http.StatusAccepted, r.status, string(r.raw))
	retry := r.body["job_id"].(string)
	f.waitProjected()
	r = f.do("GET", "/job/"+retry+"/tree", "jobs-ro", nil)
	require.Equal(t, retry, r.body["root_job_id"])
	require.Equal(t, []string{retry}, ids(r))
}
