package config

import (
	"net"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// APITLS is api.tls: the certificate the API serves, as PEM files. The
// daemon reads them at start and again on every reload (docs/remote-workers.md).
type APITLS struct {
	// CertFile holds the certificate, then any intermediates; absolute.
	CertFile string
	// KeyFile holds the certificate's private key; absolute.
	KeyFile string
}

// On reports whether the API serves TLS.
func (t APITLS) On() bool { return t.CertFile != "" }

// LoopbackListen reports whether a listener on addr (host:port) is
// reachable from this machine only: its host is localhost or a loopback
// IP. An empty host or 0.0.0.0 listens on every interface; any other name
// may resolve to anything, so neither is loopback.
func LoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// apiTLS reads api.tls into s.TLS: both files or neither.
func (l *loader) apiTLS(n *yaml.Node, path string, s *APIServer) {
	var t APITLS
	l.object(n, path, "",
		field{"cert_file", func(v *yaml.Node, path string) { t.CertFile, _ = l.filePath(v, path) }},
		field{"key_file", func(v *yaml.Node, path string) { t.KeyFile, _ = l.filePath(v, path) }},
	)
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		l.fail(n, path, "has cert_file but no key_file: add api.tls.key_file, the PEM file of the certificate's private key")
	case t.CertFile == "" && t.KeyFile != "":
		l.fail(n, path, "has key_file but no cert_file: add api.tls.cert_file, the PEM file of the certificate (then its intermediates)")
	default:
		s.TLS = t
	}
}

// apiHosts reads api.hosts: the names, beyond loopback ones, the API
// answers to (its Host check).
func (l *loader) apiHosts(n *yaml.Node, path string, s *APIServer) {
	if n.Kind != yaml.SequenceNode {
		l.fail(n, path, "must be a list of host names, e.g. hosts: [ductile.home.example, 192.168.1.20]")
		return
	}
	for i, item := range n.Content {
		p := indexPath(path, i)
		name, ok := l.str(item, p)
		if !ok {
			continue
		}
		if !hostName(name) {
			l.fail(item, p, "must be a host name or an IP address alone (no scheme, port or path), like ductile.home.example, got %q", name)
			continue
		}
		s.Hosts = append(s.Hosts, strings.ToLower(strings.Trim(name, "[]")))
	}
}

// hostName reports whether s is a DNS name or an IP address, and nothing
// more.
func hostName(s string) bool {
	if ip := net.ParseIP(strings.Trim(s, "[]")); ip != nil {
		return true
	}
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// checkPlaintext refuses an API that would serve other machines in
// plaintext: a non-loopback api.listen without api.tls, unless
// api.insecure_plaintext says so. listen is api.listen's node (nil when
// not written: the default is loopback).
func (l *loader) checkPlaintext(listen *yaml.Node, s APIServer) {
	if !s.Enabled || s.TLS.On() || s.InsecurePlaintext || LoopbackListen(s.Listen) || listen == nil {
		return
	}
	l.fail(listen, "api.listen", "%s is not a loopback address, so other machines would reach the API, bearer tokens included, in plaintext: "+
		"add api.tls.cert_file and api.tls.key_file (a certificate and its key, PEM; see docs/remote-workers.md), "+
		"or, only if a TLS proxy or a trusted network carries the traffic, api.insecure_plaintext: true", s.Listen)
}

// filePath reads a file path: ~ expanded, relative to the config
// directory.
func (l *loader) filePath(n *yaml.Node, path string) (string, bool) {
	s, ok := l.str(n, path)
	if !ok {
		return "", false
	}
	if s == "" {
		l.fail(n, path, "must not be empty: give a file, absolute or relative to the config file's directory")
		return "", false
	}
	p, err := expandHome(s)
	if err != nil {
		l.fail(n, path, "%v", err)
		return "", false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(l.dir, p)
	}
	return filepath.Clean(p), true
}
