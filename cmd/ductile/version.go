package main

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// A release build stamps these with -ldflags "-X main.stampedVersion=…"
// (Taskfile.yml's release task, tools/release): they then win over what the
// Go toolchain recorded, which a build from a module cache or an archive of
// the source may lack. Empty in a plain go build.
var (
	stampedVersion  string // the release's version, such as v0.3.0
	stampedRevision string // the git commit it was built from
	stampedDate     string // when it was built, RFC 3339 UTC
)

// versionText describes this build from its Go build info: the module
// version, the VCS revision and its time, and whether the working tree had
// changes that are not committed. A release's stamped version, revision
// and build date replace them.
func versionText(info *debug.BuildInfo, ok bool) string {
	if !ok {
		return "ductile (unknown version: built without module support)\n"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	version := info.Main.Version
	if stampedVersion != "" {
		version = stampedVersion
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ductile %s\n", version)
	if stampedRevision != "" {
		fmt.Fprintf(&b, "revision %s, built %s\n", stampedRevision, stampedDate)
	} else if rev := settings["vcs.revision"]; rev != "" {
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
