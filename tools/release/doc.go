// Command release builds Ductile's release: a static binary for each
// platform (linux amd64, arm64 and armv7, darwin arm64) (CGO_ENABLED=0,
// -trimpath) with its version, revision and build date stamped, one tar.gz
// archive per platform holding the binary, the README, the install guide,
// the licence and the service definitions
// (the systemd units; for macOS the launchd agent), and a SHA256SUMS file
// over the archives.
//
// Run it from the repository's root through `task release`, which passes
// the version (git describe) and the revision; see docs/install.md for
// what a user does with the result.
package main
