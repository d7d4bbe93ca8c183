package pipeline

import "maps"

// Without returns a set of s's pipelines but those named (s is unchanged).
func (s *Set) Without(names ...string) *Set {
	out := &Set{Pipelines: maps.Clone(s.Pipelines), called: s.called}
	for _, name := range names {
		delete(out.Pipelines, name)
	}
	out.index()
	return out
}
