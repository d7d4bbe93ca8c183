package bench

import (
	"context"
	"os"
	"path/filepath"

	"github.com/ductile/ductile/pluginhost"
)

// The bench plugin: it reads its request and answers status ok.
const (
	pluginManifest = `manifest_spec: ductile.plugin
manifest_version: 1
name: bench
version: 1.0.0
protocol: 2
entrypoint: run.sh
description: does nothing, quickly
commands:
  poll: {type: read}
`
	pluginScript = "#!/bin/sh\ncat >/dev/null\necho '{\"status\":\"ok\",\"result\":\"ok\"}'\n"
)

// writePlugin writes the bench plugin into dir.
func writePlugin(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, pluginhost.ManifestFile), []byte(pluginManifest), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "run.sh"), []byte(pluginScript), 0o755)
}

// noopStep answers every request as the bench plugin's script does.
func noopStep(context.Context, []byte) ([]byte, error) {
	return []byte(`{"status":"ok","result":"ok"}`), nil
}
