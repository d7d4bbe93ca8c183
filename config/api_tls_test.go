package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
)

// A non-loopback api.listen needs api.tls or api.insecure_plaintext: true;
// the error says what to add.
func TestAPIPlaintextOffLoopbackIsRefused(t *testing.T) {
	dir := t.TempDir()
	load := func(text string) (*config.Config, error) {
		path := filepath.Join(dir, "config.yaml")
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
		return config.Load(path)
	}
	for _, listen := range []string{"0.0.0.0:8080", ":8080", "192.168.1.20:8080", "[::]:8080", "ductile.home.example:8080"} {
		_, err := load("api:\n  listen: " + `"` + listen + `"` + "\n")
		require.ErrorContains(t, err, "config.yaml:2: api.listen: "+listen+" is not a loopback address", listen)
		require.ErrorContains(t, err, "add api.tls.cert_file and api.tls.key_file", listen)
		require.ErrorContains(t, err, "api.insecure_plaintext: true", listen)
	}
	for _, listen := range []string{"127.0.0.1:8080", "127.0.0.2:0", "[::1]:8080", "localhost:8080", "LocalHost:1"} {
		_, err := load("api:\n  listen: " + `"` + listen + `"` + "\n")
		require.NoError(t, err, listen)
	}
	// Off, the address is not served: nothing to refuse.
	_, err := load("api: {enabled: false, listen: \"0.0.0.0:8080\"}\n")
	require.NoError(t, err)

	cfg, err := load("api: {listen: \"0.0.0.0:8080\", insecure_plaintext: true}\n")
	require.NoError(t, err)
	require.True(t, cfg.APIServer.InsecurePlaintext)
	require.False(t, cfg.APIServer.TLS.On())

	cfg, err = load("api:\n  listen: \"0.0.0.0:8080\"\n  tls: {cert_file: tls/cert.pem, key_file: ~/key.pem}\n")
	require.NoError(t, err)
	home, err := os.UserHomeDir()
	require.NoError(t, err)
	require.Equal(t, config.APITLS{CertFile: filepath.Join(dir, "tls", "cert.pem"), KeyFile: filepath.Join(home, "key.pem")}, cfg.APIServer.TLS)
	require.True(t, cfg.APIServer.TLS.On())

	_, err = load("api:\n  listen: \"0.0.0.0:8080\"\n  tls: {cert_file: cert.pem}\n")
	require.ErrorContains(t, err, "api.tls: has cert_file but no key_file: add api.tls.key_file")
	require.ErrorContains(t, err, "api.listen: 0.0.0.0:8080 is not a loopback address", "half a TLS config serves no TLS")
	_, err = load("api:\n  tls: {key_file: key.pem, cert: x}\n")
	require.ErrorContains(t, err, "api.tls: has key_file but no cert_file: add api.tls.cert_file")
	require.ErrorContains(t, err, "api.tls.cert: unknown key: did you mean cert_file?")
	_, err = load("api:\n  tls: {cert_file: \"\", key_file: k}\n  insecure_plaintext: yes-please\n")
	require.ErrorContains(t, err, "api.tls.cert_file: must not be empty: give a file")
	require.ErrorContains(t, err, "api.insecure_plaintext: must be true or false")
}

func TestAPIHosts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("api:\n  hosts: [Ductile.Home.Example, 192.168.1.20, \"[fd00::1]\", box]\n"), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err)
	require.Equal(t, []string{"ductile.home.example", "192.168.1.20", "fd00::1", "box"}, cfg.APIServer.Hosts)

	require.NoError(t, os.WriteFile(path, []byte("api:\n  hosts: [\"https://ductile.example\", \"box:8080\", \"\", -bad.example, {a: 1}]\n"), 0o600))
	_, err = config.Load(path)
	for i := range 4 {
		require.ErrorContains(t, err, "api.hosts["+string(rune('0'+i))+"]: must be a host name or an IP address alone")
	}
	require.ErrorContains(t, err, "api.hosts[4]: must be a string")

	require.NoError(t, os.WriteFile(path, []byte("api:\n  hosts: box\n"), 0o600))
	_, err = config.Load(path)
	require.ErrorContains(t, err, "api.hosts: must be a list of host names")
}
