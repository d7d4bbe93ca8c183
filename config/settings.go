package config

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/zeebo/blake3"
	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/events"
)

// FileHash is a config file and the BLAKE3 hash of the bytes read from it.
type FileHash struct {
	Path   string `json:"path" yaml:"path"`
	BLAKE3 string `json:"blake3" yaml:"blake3"`
}

// Settings returns c's effective settings as config.applied records them
// (events.Settings): every key with its default filled in, in the config
// file's own schema, secrets by hash only (schedule payloads redacted as
// config show redacts them).
func (c *Config) Settings() events.Settings {
	v := c.Redacted().view()
	s := events.Settings{
		Source: c.Source, Files: fileHashSettings(c.FileHashes),
		StateDir: v.StateDir, PluginRoots: v.PluginRoots, Service: v.Service.settings(), Routes: routeSettings(v.Routes),
		Plugins: make(map[string]events.PluginSettings, len(v.Plugins)),
	}
	for name, pv := range v.Plugins {
		s.Plugins[name] = pv.settings(HashValue(c.Plugins[name].Config))
	}
	for name, n := range map[string]*yaml.Node{"pipelines": c.Pipelines, "api": c.API, "webhooks": c.Webhooks} {
		if n != nil {
			if s.Sections == nil {
				s.Sections = map[string]string{}
			}
			s.Sections[name] = HashValue(rawData(n))
		}
	}
	tokens, sections := c.tokensDigest()
	s.Tokens = tokens
	for name, hash := range sections {
		if s.Sections == nil {
			s.Sections = map[string]string{}
		}
		s.Sections[name] = hash
	}
	s.Hash = settingsHash(s)
	return s
}

// settingsHash is the BLAKE3 hash of s without Hash, Source and Files.
func settingsHash(s events.Settings) string {
	s.Hash, s.Source, s.Files = "", "", nil
	return HashValue(s)
}

// HashValue is "blake3:<hex>" of v's JSON encoding (object keys sorted, so
// equal values hash alike): how the ledger records a value it must not hold.
func HashValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only values that cannot be config (channels, functions) fail.
		panic(fmt.Sprintf("config: hash a value: %v", err))
	}
	return HashBytes(b)
}

// HashBytes is "blake3:<hex>" of b.
func HashBytes(b []byte) string {
	sum := blake3.Sum256(b)
	return "blake3:" + hex.EncodeToString(sum[:])
}

// FromSettings rebuilds the Config s was made from, as far as s holds it:
// every typed setting, plugin config: maps empty (only their hashes were
// recorded) and no pipelines, api or webhooks sections. The CLI decides
// with it what a running daemon decides with (enqueue defaults).
func FromSettings(s events.Settings) (*Config, error) {
	v := configView{
		StateDir: s.StateDir, PluginRoots: s.PluginRoots, Service: serviceViewOf(s.Service), Routes: routeViewsOf(s.Routes),
		Plugins: make(map[string]pluginView, len(s.Plugins)),
	}
	for name, p := range s.Plugins {
		v.Plugins[name] = pluginViewOf(p)
	}
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return nil, fmt.Errorf("rebuild applied config: %w", err)
	}
	escapeValues(&n)
	data, err := yaml.Marshal(&n)
	if err != nil {
		return nil, fmt.Errorf("rebuild applied config: %w", err)
	}
	source := s.Source
	if source == "" {
		source = "applied-config.yaml"
	}
	cfg, err := loadData(source, data, fileStat{}, func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, fmt.Errorf("rebuild applied config: %w", err)
	}
	cfg.Source, cfg.Files, cfg.FileHashes = s.Source, nil, fileHashesOf(s.Files)
	for _, f := range s.Files {
		cfg.Files = append(cfg.Files, f.Path)
	}
	if s.Source == "" {
		cfg.Dir = ""
	}
	return cfg, nil
}

// DiffSettings lists the settings whose values differ between applied and
// s, by dotted path (plugins.echo.retry.max_attempts), in path order.
// Plugins are matched by name, schedule entries by id
// (plugins.echo.schedules[nightly].cron), other lists of mappings by
// position (routes[2].to); a plugin or entry on one side only is one
// difference holding all of it. Plugin config: maps compare by
// hash; Files and Source are not compared.
func DiffSettings(s, applied events.Settings) []events.SettingChange {
	a, aItems := flatten(applied)
	b, bItems := flatten(s)
	var out []events.SettingChange
	done := map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(union(a, b))) {
		av, aok := a[k]
		bv, bok := b[k]
		if aok && bok && jsonEqual(av, bv) {
			continue
		}
		// Under an entry that only one side has: the entry, once.
		if item := itemOf(k, aItems, bItems); item != "" {
			if !done[item] {
				done[item] = true
				out = append(out, events.SettingChange{Path: item, File: bItems[item], Applied: aItems[item]})
			}
			continue
		}
		d := events.SettingChange{Path: k}
		if aok {
			d.Applied = av
		}
		if bok {
			d.File = bv
		}
		out = append(out, d)
	}
	return out
}

// itemOf is the entry path of k ("…schedules[x]") when only one of a and b
// has that entry, else "".
func itemOf(k string, a, b map[string]any) string {
	// Outermost first: a plugin added with its schedules is one entry.
	var candidates []string
	if rest, ok := strings.CutPrefix(k, "plugins."); ok {
		name, _, _ := strings.Cut(rest, ".")
		candidates = append(candidates, "plugins."+name)
	}
	for i := strings.Index(k, "]"); i > 0; {
		candidates = append(candidates, k[:i+1])
		next := strings.Index(k[i+1:], "]")
		if next < 0 {
			break
		}
		i += next + 1
	}
	for _, item := range candidates {
		_, inA := a[item]
		_, inB := b[item]
		if inA != inB {
			return item
		}
	}
	return ""
}

// flatten maps each leaf of s to its value, by dotted path, and each entry
// of a list of mappings to the entry: a list whose entries all have an id
// is walked by id (schedules[nightly].cron), another by position
// (routes[2].to); any other list is a leaf.
func flatten(s events.Settings) (leaves, items map[string]any) {
	s.Hash, s.Source, s.Files = "", "", nil
	b, _ := json.Marshal(s)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	leaves, items = map[string]any{}, map[string]any{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if len(v) == 0 {
				break
			}
			for k, c := range v {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				if prefix == "plugins" {
					// A plugin is an entry: one added or removed is one
					// difference.
					items[p] = c
				}
				walk(p, c)
			}
			return
		case []any:
			if len(v) == 0 || !slices.ContainsFunc(v, func(e any) bool { _, ok := e.(map[string]any); return ok }) {
				break
			}
			keys := entryKeys(v)
			for i, c := range v {
				item := fmt.Sprintf("%s[%s]", prefix, keys[i])
				items[item] = c
				walk(item, c)
			}
			return
		}
		leaves[prefix] = v
	}
	walk("", m)
	return leaves, items
}

// entryKeys names the entries of a list: by their ids when every entry has
// a distinct one, else by position.
func entryKeys(list []any) []string {
	keys := make([]string, len(list))
	seen := map[string]bool{}
	for i, e := range list {
		m, _ := e.(map[string]any)
		id, ok := m["id"].(string)
		if !ok || id == "" || seen[id] || strings.ContainsAny(id, "[].") {
			for i := range list {
				keys[i] = strconv.Itoa(i)
			}
			return keys
		}
		seen[id] = true
		keys[i] = id
	}
	return keys
}

func union(a, b map[string]any) map[string]any {
	u := maps.Clone(a)
	maps.Copy(u, b)
	return u
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// hashFile is the FileHash of path's content as read.
func hashFile(path string, data []byte) FileHash {
	return FileHash{Path: path, BLAKE3: HashBytes(data)}
}
