package events

// PipelineStep says where a job stands in a pipeline run: which run, which
// compiled pipeline (by name and hash: a tree finishes on the version it
// started with), which node of it, and the split instances it is inside
// (innermost last), which a join waits on.
type PipelineStep struct {
	Run      string   `json:"run"`
	Pipeline string   `json:"pipeline"`
	Hash     string   `json:"hash"`
	Node     string   `json:"node"`
	Splits   []string `json:"splits,omitempty"`
}

// RunStream is the stream of one pipeline run: its start, its progress
// (the joins it waits on) and its end.
func RunStream(id string) string { return "run/" + id }
