// Package pluginsource installs plugins from where they are published into
// a plugin root, pins them, and keeps them: ductile plugin add, update and
// remove.
//
// A source is a git URL, a local git repository or a plain folder, with an
// optional ref (SOURCE@REF) and a subfolder (a repository of many plugins,
// one folder each). Git sources are fetched with the git command (shallow
// where the server allows it) into a temporary directory; the plugin's
// folder is copied into a staging directory inside the root (a name
// starting with ".", which discovery skips), validated there by the very
// code discovery runs (pluginhost.LoadDir), then renamed into place as
// <root>/<plugin name>. What it came from (source, ref, commit, subfolder)
// is recorded in <plugin>/.ductile-source.json, and the hash of every file
// of the plugin, that record included, in the root's .checksums
// (pluginhost.RootChecksumsName), which discovery checks at every start
// and reload: a changed, missing or added file refuses the plugin.
package pluginsource
