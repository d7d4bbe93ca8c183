package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/ductile/ductile/config"
)

// servedCertificate is the certificate the API serves: read from api.tls's
// files at start and again by each reload, and swapped whole, so a
// handshake gets the old pair or the new one, never half of each.
type servedCertificate struct {
	pair atomic.Pointer[tls.Certificate]
}

// get is tls.Config.GetCertificate.
func (c *servedCertificate) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.pair.Load(), nil
}

// tlsConfig is the API's TLS: TLS 1.2 at least, the certificate c holds
// now, HTTP/1.1.
func (c *servedCertificate) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.get, NextProtos: []string{"http/1.1"}}
}

// loadCertificate reads api.tls's pair. Its errors say which file is wrong
// and what to give instead.
func loadCertificate(t config.APITLS) (*tls.Certificate, error) {
	var pem [2][]byte
	for i, f := range []struct{ key, path, what string }{
		{"cert_file", t.CertFile, "the certificate, then its intermediates"},
		{"key_file", t.KeyFile, "the certificate's private key"},
	} {
		data, err := os.ReadFile(f.path)
		switch {
		case errors.Is(err, fs.ErrPermission):
			return nil, fmt.Errorf("api.tls.%s: %w: the daemon's user must be able to read it (run config check as that user)", f.key, err)
		case err != nil:
			return nil, fmt.Errorf("api.tls.%s: %w: give the PEM file of %s", f.key, err, f.what)
		}
		pem[i] = data
	}
	pair, err := tls.X509KeyPair(pem[0], pem[1])
	if err != nil {
		return nil, fmt.Errorf("api.tls: %s and %s do not load as a certificate and its key (%w): give PEM files, the certificate (then its intermediates) in cert_file and its own private key in key_file",
			t.CertFile, t.KeyFile, err)
	}
	return &pair, nil
}

// certificateFacts names a certificate in a log line or a warning.
func certificateFacts(c *x509.Certificate) []any {
	return []any{"subject", c.Subject.String(), "serial", c.SerialNumber.Text(16),
		"names", append(append([]string{}, c.DNSNames...), ipStrings(c.IPAddresses)...),
		"not_after", c.NotAfter.UTC().Format(time.RFC3339)}
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

// checkTLS is what config check and a reload find of api.tls: an error
// when the pair does not load; a warning when the certificate is outside
// its validity period now, does not name one of api.hosts, or its key is
// readable by others.
func checkTLS(cfg *config.Config, now time.Time) (errs, warnings []string) {
	s := cfg.APIServer
	if !s.Enabled || !s.TLS.On() {
		return nil, nil
	}
	pair, err := loadCertificate(s.TLS)
	if err != nil {
		return []string{err.Error()}, nil
	}
	leaf := pair.Leaf
	switch {
	case now.After(leaf.NotAfter):
		warnings = append(warnings, fmt.Sprintf("api.tls.cert_file: the certificate expired at %s: clients refuse it; renew it, then ductile system reload",
			leaf.NotAfter.UTC().Format(time.RFC3339)))
	case now.Before(leaf.NotBefore):
		warnings = append(warnings, fmt.Sprintf("api.tls.cert_file: the certificate is valid only from %s: clients refuse it until then (check this machine's clock)",
			leaf.NotBefore.UTC().Format(time.RFC3339)))
	}
	if fi, err := os.Stat(s.TLS.KeyFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
		warnings = append(warnings, fmt.Sprintf("api.tls.key_file: %s is readable by other users (mode %04o): whoever reads it can pose as the daemon; chmod 600 %s",
			s.TLS.KeyFile, fi.Mode().Perm(), s.TLS.KeyFile))
	}
	for _, h := range s.Hosts {
		if leaf.VerifyHostname(h) != nil {
			warnings = append(warnings, fmt.Sprintf("api.hosts: %s is not a name of the certificate in api.tls.cert_file (%v): a client calling the API by it refuses the certificate; make one that names it (subjectAltName)",
				h, append(append([]string{}, leaf.DNSNames...), ipStrings(leaf.IPAddresses)...)))
		}
	}
	return errs, warnings
}

// secureAPI wraps the API's listener in TLS when the config has api.tls,
// with the pair read now: the certificate it returns is the one a reload
// swaps (nil: plaintext).
func (d *Daemon) secureAPI(ln net.Listener, s config.APIServer) (net.Listener, *servedCertificate, error) {
	if !s.TLS.On() {
		if !config.LoopbackListen(s.Listen) {
			d.log.Warn("api: serving plaintext off loopback (api.insecure_plaintext: true): tokens cross the network in the clear unless a TLS proxy or a trusted network carries them",
				"addr", ln.Addr().String())
		}
		return ln, nil, nil
	}
	pair, err := loadCertificate(s.TLS)
	if err != nil {
		return nil, nil, err
	}
	c := &servedCertificate{}
	c.pair.Store(pair)
	d.log.Info("api: serving TLS", certificateFacts(pair.Leaf)...)
	return tls.NewListener(ln, c.tlsConfig()), c, nil
}

// reloadAPICertificate reads api.tls's pair again after a reload applied
// cfg, and serves it from the next handshake on. A pair that does not load
// leaves the one served (the reload's check said why already). The
// listener itself is fixed at start: turning TLS on or off takes a restart.
func (d *Daemon) reloadAPICertificate(cfg *config.Config) {
	s := cfg.APIServer
	switch {
	case d.api == nil:
		return
	case d.api.certificate == nil:
		if s.TLS.On() {
			d.log.Warn("api: api.tls was added, but the API serves plaintext until the daemon restarts: restart it to serve TLS")
		}
		return
	case !s.TLS.On():
		d.log.Warn("api: api.tls was removed, but the API serves TLS with the certificate it has until the daemon restarts")
		return
	}
	pair, err := loadCertificate(s.TLS)
	if err != nil {
		d.log.Error("api: certificate not reloaded: serving the one it had", "err", err.Error())
		return
	}
	d.api.certificate.pair.Store(pair)
	d.log.Info("api: certificate reloaded", certificateFacts(pair.Leaf)...)
}
