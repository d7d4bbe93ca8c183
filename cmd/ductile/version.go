package main

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// versionText describes this build from its Go build info: the module
// version, the VCS revision and its time, and whether the working tree had
// changes that are not committed.
func versionText(info *debug.BuildInfo, ok bool) string {
	if !ok {
		return "ductile (unknown version: built without module support)\n"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ductile %s\n", info.Main.Version)
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, "revision %s", rev)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " (%s)", t)
		}
		if settings["vcs.modified"] == "true" {
			b.WriteString(", with uncommitted changes")
		}
		b.WriteByte('\n')
	} else {
		b.WriteString("revision unknown (built outside a git checkout, or with -buildvcs=false)\n")
	}
	fmt.Fprintf(&b, "%s %s/%s\n", info.GoVersion, settings["GOOS"], settings["GOARCH"])
	return b.String()
}
