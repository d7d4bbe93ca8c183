// Package ptytest opens pseudo-terminals for tests: a real terminal,
// without a library.
package ptytest
