package pipeline

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ductile/ductile/config"
)

// HookWarnings lists each on-hook pipeline of s that can never fire: no
// enabled plugin of cfg has notify_on_complete: true.
func HookWarnings(cfg *config.Config, s *Set) []config.FieldError {
	if s == nil {
		return nil
	}
	for _, p := range cfg.Plugins {
		if p.Enabled && p.NotifyOnComplete {
			return nil
		}
	}
	var candidates []string
	for name, p := range cfg.Plugins {
		if p.Enabled {
			candidates = append(candidates, name)
		}
	}
	slices.Sort(candidates)
	fix := "plugins.<name>.notify_on_complete: true"
	if len(candidates) > 0 {
		fix += " (configured plugins: " + strings.Join(candidates, ", ") + ")"
	}
	var out []config.FieldError
	for _, name := range slices.Sorted(maps.Keys(s.Pipelines)) {
		p := s.Pipelines[name]
		if p.OnHook == "" {
			continue
		}
		out = append(out, config.FieldError{File: p.File, Line: p.Line, Path: "pipelines[" + name + "].on-hook",
			Msg: fmt.Sprintf("no enabled plugin has notify_on_complete: true, so this pipeline never runs (%s fires only for such plugins' jobs): set %s on the plugins whose jobs it should follow", p.OnHook, fix)})
	}
	return out
}
