package plugins

import (
	"fmt"
	"io/fs"
	"path"
)

// SDK returns the bundled SDK file name (ductile.sh or ductile.py) of lib/:
// what `ductile plugin new` copies beside a new plugin's entrypoint.
func SDK(name string) ([]byte, error) {
	data, err := fs.ReadFile(bundled, path.Join("lib", name))
	if err != nil {
		return nil, fmt.Errorf("bundled SDK %s: %w", name, err)
	}
	return data, nil
}
