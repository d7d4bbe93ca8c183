package pluginhost

import (
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Manifest constants: the only manifest_spec, manifest_version and plugin
// protocol this core understands.
const (
	ManifestSpec    = "ductile.plugin"
	ManifestVersion = 1
	ProtocolVersion = 2

	// ManifestFile is the file that marks a directory as a plugin.
	ManifestFile = "manifest.yaml"
)

// ErrInvalidManifest is matched (errors.Is) by every manifest parse or
// validation failure. The concrete error is a *ManifestError.
var ErrInvalidManifest = errors.New("invalid manifest")

// ManifestError lists every problem found in one manifest.
type ManifestError struct {
	Problems []string
}

func (e *ManifestError) Error() string {
	return "invalid manifest: " + strings.Join(e.Problems, "; ")
}

// Is makes errors.Is(err, ErrInvalidManifest) true.
func (e *ManifestError) Is(target error) bool { return target == ErrInvalidManifest }

// CommandType is the coarse permission class of a command: read commands have
// no external side effects (safe to retry, allowed to read-only tokens), write
// commands may change the outside world.
type CommandType string

// Command types. An omitted type means CommandWrite (the paranoid default).
const (
	CommandRead  CommandType = "read"
	CommandWrite CommandType = "write"
)

// CompatibilityView says how the plugin_state compatibility view is rebuilt
// when a fact lands.
type CompatibilityView string

// MirrorObject, the only compatibility view today: plugin_state becomes the
// fact's snapshot object. It is also the default when a rule omits it.
const MirrorObject CompatibilityView = "mirror_object"

// Manifest is a parsed manifest.yaml.
type Manifest struct {
	ManifestSpec    string     `yaml:"manifest_spec"`
	ManifestVersion int        `yaml:"manifest_version"`
	Name            string     `yaml:"name"`
	Version         string     `yaml:"version"`
	Protocol        int        `yaml:"protocol"`
	Entrypoint      string     `yaml:"entrypoint"`
	Description     string     `yaml:"description"`
	Commands        Commands   `yaml:"commands"`
	ConfigKeys      ConfigKeys `yaml:"config_keys"`
	// ConcurrencySafe is a scheduling hint: false asks the dispatcher not to
	// run two jobs of this plugin at once. Default true.
	ConcurrencySafe bool         `yaml:"concurrency_safe"`
	FactOutputs     []FactOutput `yaml:"fact_outputs"`
	// Extra keeps top-level keys this core does not know (forward
	// compatibility: a newer manifest still loads).
	Extra map[string]any `yaml:",inline"`
}

// ConfigKeys lists the config keys a plugin reads. Required keys are checked
// at discovery: a plugin whose config lacks one is not loaded.
type ConfigKeys struct {
	Required []string `yaml:"required"`
	Optional []string `yaml:"optional"`
}

// FactOutput declares that a command's state_updates snapshot is recorded as
// an append-only fact of FactType.
type FactOutput struct {
	When              FactOutputWhen    `yaml:"when"`
	From              string            `yaml:"from"`
	FactType          string            `yaml:"fact_type"`
	CompatibilityView CompatibilityView `yaml:"compatibility_view"`
}

// FactOutputWhen selects the command a FactOutput applies to.
type FactOutputWhen struct {
	Command string `yaml:"command"`
}

// CommandSpec describes one command. Name, Type and Description drive the
// core; the other fields are descriptive metadata kept for tooling (schemas,
// pipeline value checks, docs).
type CommandSpec struct {
	Name         string         `yaml:"name"`
	Type         CommandType    `yaml:"type"`
	Description  string         `yaml:"description"`
	Idempotent   *bool          `yaml:"idempotent"`
	RetrySafe    *bool          `yaml:"retry_safe"`
	InputSchema  any            `yaml:"input_schema"`
	OutputSchema any            `yaml:"output_schema"`
	Values       *CommandValues `yaml:"values"`
	// Extra keeps any other keys of the command entry.
	Extra map[string]any `yaml:",inline"`
}

// CommandValues names the payload values a command consumes and emits.
type CommandValues struct {
	Consume []string        `yaml:"consume"`
	Emit    []EmittedValues `yaml:"emit"`
}

// EmittedValues names the values in one event type a command emits.
type EmittedValues struct {
	Event  string   `yaml:"event"`
	Values []string `yaml:"values"`
}

// Commands is the ordered list of a plugin's commands. In YAML it is either a
// map keyed by command name or a list of objects with a name (or bare names).
type Commands []CommandSpec

// UnmarshalYAML accepts both manifest forms:
//
//	commands: {poll: {type: read}, sync: {type: write}}
//	commands: [{name: poll, type: read}, {name: sync}]
//
// A list item may also be a bare name (commands: [poll, handle]). A missing
// type becomes "write".
func (c *Commands) UnmarshalYAML(n *yaml.Node) error {
	var out Commands
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			var name string
			if err := n.Content[i].Decode(&name); err != nil {
				return fmt.Errorf("commands: key on line %d: %w", n.Content[i].Line, err)
			}
			var spec CommandSpec
			v := n.Content[i+1]
			if !isNull(v) {
				if v.Kind != yaml.MappingNode {
					return fmt.Errorf("commands.%s (line %d): must be a mapping", name, v.Line)
				}
				if err := v.Decode(&spec); err != nil {
					return fmt.Errorf("commands.%s: %w", name, err)
				}
			}
			spec.Name = name
			out = append(out, spec)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			var spec CommandSpec
			switch item.Kind {
			case yaml.ScalarNode:
				if err := item.Decode(&spec.Name); err != nil {
					return fmt.Errorf("commands[%d]: %w", i, err)
				}
			case yaml.MappingNode:
				if err := item.Decode(&spec); err != nil {
					return fmt.Errorf("commands[%d]: %w", i, err)
				}
			default:
				return fmt.Errorf("commands[%d] (line %d): must be a name or a mapping", i, item.Line)
			}
			out = append(out, spec)
		}
	default:
		if isNull(n) {
			*c = nil
			return nil
		}
		return fmt.Errorf("commands (line %d): must be a mapping or a list", n.Line)
	}
	for i := range out {
		out[i].Name = strings.TrimSpace(out[i].Name)
		if out[i].Type == "" {
			out[i].Type = CommandWrite
		}
	}
	*c = out
	return nil
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// LoadManifest reads and validates the manifest at path.
func LoadManifest(path string) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	return ParseManifest(data)
}

// ParseManifest decodes and validates a manifest. Every error matches
// ErrInvalidManifest.
func ParseManifest(data []byte) (*Manifest, error) {
	m := &Manifest{ConcurrencySafe: true}
	if err := yaml.Unmarshal(data, m); err != nil {
		return nil, &ManifestError{Problems: []string{err.Error()}}
	}
	for i := range m.FactOutputs {
		if m.FactOutputs[i].CompatibilityView == "" {
			m.FactOutputs[i].CompatibilityView = MirrorObject
		}
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// nameRE is the rule for a plugin name; Validate's message states it.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// Validate checks the manifest against the rules of spec §5.4 and returns a
// *ManifestError listing every problem, or nil. An empty compatibility_view
// is allowed (it means MirrorObject; ParseManifest fills it in).
func (m *Manifest) Validate() error {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }

	if m.ManifestSpec != ManifestSpec {
		add("manifest_spec must be %q, got %q", ManifestSpec, m.ManifestSpec)
	}
	if m.ManifestVersion != ManifestVersion {
		add("manifest_version must be %d, got %d", ManifestVersion, m.ManifestVersion)
	}
	switch {
	case m.Name == "":
		add("name is required")
	case !nameRE.MatchString(m.Name):
		add("name %q must start with an ASCII letter or digit and contain only ASCII letters, digits, '_', '-' and '.'", m.Name)
	}
	if m.Version == "" {
		add("version is required")
	}
	if m.Protocol != ProtocolVersion {
		add("protocol %d is not supported (this core speaks protocol %d)", m.Protocol, ProtocolVersion)
	}
	if msg := checkEntrypoint(m.Entrypoint); msg != "" {
		add("%s", msg)
	}

	if len(m.Commands) == 0 {
		add("commands: at least one command is required")
	}
	seen := make(map[string]bool, len(m.Commands))
	for i, c := range m.Commands {
		switch {
		case c.Name == "":
			add("commands[%d]: name is required", i)
			continue
		case seen[c.Name]:
			add("command %q is declared twice", c.Name)
		}
		seen[c.Name] = true
		if c.Type != CommandRead && c.Type != CommandWrite {
			add("command %q: type %q must be %q or %q", c.Name, c.Type, CommandRead, CommandWrite)
		}
	}

	for _, k := range append(append([]string(nil), m.ConfigKeys.Required...), m.ConfigKeys.Optional...) {
		if strings.TrimSpace(k) == "" {
			add("config_keys: empty key")
		}
	}

	for i := range m.FactOutputs {
		f := m.FactOutputs[i]
		switch {
		case f.When.Command == "":
			add("fact_outputs[%d]: when.command is required", i)
		case !seen[f.When.Command]:
			add("fact_outputs[%d]: when.command %q is not a declared command", i, f.When.Command)
		}
		if f.From != "state_updates" {
			add("fact_outputs[%d]: from must be \"state_updates\", got %q", i, f.From)
		}
		if f.FactType == "" {
			add("fact_outputs[%d]: fact_type is required", i)
		}
		if f.CompatibilityView != "" && f.CompatibilityView != MirrorObject {
			add("fact_outputs[%d]: compatibility_view %q is not supported (only %q)", i, f.CompatibilityView, MirrorObject)
		}
	}

	if len(p) > 0 {
		return &ManifestError{Problems: p}
	}
	return nil
}

// checkEntrypoint returns a problem description, or "" when ep is a clean
// relative path that stays inside the plugin directory.
func checkEntrypoint(ep string) string {
	switch {
	case ep == "":
		return "entrypoint is required"
	case strings.HasPrefix(ep, "/"):
		return fmt.Sprintf("entrypoint %q must be relative to the plugin directory", ep)
	case strings.Contains(ep, "\\"):
		return fmt.Sprintf("entrypoint %q must use '/' as separator", ep)
	}
	for _, seg := range strings.Split(ep, "/") {
		if seg == ".." {
			return fmt.Sprintf("entrypoint %q must not contain \"..\"", ep)
		}
	}
	if c := path.Clean(ep); c == "." {
		return fmt.Sprintf("entrypoint %q does not name a file", ep)
	}
	return ""
}

// Command returns the command named name.
func (m *Manifest) Command(name string) (CommandSpec, bool) {
	for _, c := range m.Commands {
		if c.Name == name {
			return c, true
		}
	}
	return CommandSpec{}, false
}

// FactOutputsFor returns the fact output rules that apply to command.
func (m *Manifest) FactOutputsFor(command string) []FactOutput {
	var out []FactOutput
	for _, f := range m.FactOutputs {
		if f.When.Command == command {
			out = append(out, f)
		}
	}
	return out
}
