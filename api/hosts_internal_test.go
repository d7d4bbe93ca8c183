package api

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHostPolicy(t *testing.T) {
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	everywhere := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	lan := &net.TCPAddr{IP: net.IPv4(192, 168, 1, 20), Port: 8080}
	served := func(p hostPolicy, hosts ...string) {
		t.Helper()
		for _, h := range hosts {
			require.True(t, p.serves(h), h)
		}
	}
	refused := func(p hostPolicy, hosts ...string) {
		t.Helper()
		for _, h := range hosts {
			require.False(t, p.serves(h), h)
		}
	}
	loopbackNames := []string{"localhost", "localhost:8080", "127.0.0.1:8080", "[::1]:8080", "LOCALHOST"}

	// Loopback, no api.hosts: loopback names only (DNS rebinding).
	p := newHostPolicy(loopback, nil)
	served(p, loopbackNames...)
	refused(p, "rebound.example", "rebound.example:8080", "192.168.1.20:8080", "")

	// Loopback with api.hosts (a tunnel or a proxy calls it by name).
	p = newHostPolicy(loopback, []string{"ductile.home.example", "fd00::1"})
	served(p, loopbackNames...)
	served(p, "ductile.home.example", "Ductile.Home.Example:8443", "ductile.home.example.", "[fd00::1]:8080")
	refused(p, "evil.example", "home.example", "ductile.home.example.evil.example")

	// Off loopback without api.hosts: every name its addresses have.
	for _, addr := range []net.Addr{everywhere, lan} {
		served(newHostPolicy(addr, nil), "192.168.1.20:8080", "box.lan", "anything.example")
	}
	// Off loopback with api.hosts: those names and loopback ones.
	p = newHostPolicy(everywhere, []string{"box.lan", "192.168.1.20"})
	served(p, loopbackNames...)
	served(p, "box.lan:8080", "192.168.1.20:8080", "BOX.LAN")
	refused(p, "192.168.1.21:8080", "other.lan")

	// No listener (Handler alone): every Host.
	served(hostPolicy{}, "anything.example")
}
