package pipeline

// Summary is a pipeline in one line: what ductile pipeline list prints,
// and the first fields of GET /pipelines.
type Summary struct {
	Name          string `json:"name"`
	On            string `json:"on,omitempty" doc:"The event type that starts a run"`
	OnHook        string `json:"on_hook,omitempty" doc:"The hook signal that starts a run"`
	ExecutionMode string `json:"execution_mode" enum:"async,synchronous"`
	Timeout       string `json:"timeout" doc:"How long a synchronous caller waits (a Go duration: 30s)"`
	MaxDepth      int    `json:"max_depth"`
	Steps         int    `json:"steps" doc:"How many compiled nodes (calls inlined)"`
	Hash          string `json:"hash" doc:"blake3:<hex> of the compiled form: a run records it"`
	File          string `json:"file,omitempty" doc:"The config file that declares it"`
	Line          int    `json:"line,omitempty"`
}

// Summary returns the pipeline's Summary.
func (p *Pipeline) Summary() Summary {
	return Summary{Name: p.Name, On: p.On, OnHook: string(p.OnHook), ExecutionMode: p.ExecutionMode,
		Timeout: p.Timeout.String(), MaxDepth: p.MaxDepth, Steps: len(p.Nodes), Hash: p.Hash, File: p.File, Line: p.Line}
}

// Drawn is a pipeline as a front end shows it: its Summary, what starts
// it, and its Graph (GET /pipelines).
type Drawn struct {
	Summary
	Trigger string `json:"trigger" doc:"What starts it: on: <event>, on-hook: <signal>, or run (API or CLI only)"`
	Graph   Graph  `json:"graph"`
}

// Drawn returns the pipeline's Drawn.
func (p *Pipeline) Drawn() Drawn {
	return Drawn{Summary: p.Summary(), Trigger: p.Trigger(), Graph: p.Graph()}
}

// Shown is one pipeline in full (GET /pipelines/{name}): Drawn, and its
// compiled nodes in Order.
type Shown struct {
	Drawn
	Nodes []*Node `json:"nodes"`
}

// Shown returns the pipeline's Shown.
func (p *Pipeline) Shown() Shown {
	nodes := p.Order()
	if nodes == nil {
		nodes = []*Node{}
	}
	return Shown{Drawn: p.Drawn(), Nodes: nodes}
}

// Names returns the set's pipeline names, sorted; none for a nil set.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	return sortedKeys(s.Pipelines)
}
