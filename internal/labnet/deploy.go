package labnet

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/plait/plait/internal/nstest"
	"github.com/plait/plait/internal/sockrpc"
)

// A deployed lab (Options.Deploy) runs as an operator would across machines: the
// controller has a namespace of its own that reaches the hosts and the switches only
// over a management network, and every API it uses is TCP with mutual TLS, with
// certificates from a lab CA (plait cert's code):
//
//	ctl m1 172.31.1.1 ── mgmt 172.31.1.2 h1    agent API on :9470
//	ctl m2 172.31.2.1 ── mgmt 172.31.2.2 h2    agent API on :9470
//	ctl m3 172.31.3.1 ── mgmt 172.31.3.2 net   switches' P4Runtime on :9700+i
//
// Every end's certificate is issued for its management address; the controller's
// ("controller") and an operator's ("operator") for client use only.

const agentPort = 9470

func (l *Lab) deploy() {
	l.Ctl = nstest.New(l.t, "ctl")
	for i, ns := range []*nstest.NS{l.H1, l.H2, l.Net} {
		nstest.Veth(l.t, l.Ctl, fmt.Sprintf("m%d", i+1), ns, "mgmt")
		l.Ctl.Addr(fmt.Sprintf("m%d", i+1), fmt.Sprintf("172.31.%d.1/24", i+1))
		ns.Addr("mgmt", fmt.Sprintf("172.31.%d.2/24", i+1))
	}
	l.PKI = filepath.Join(l.Dir, "pki")
	if err := sockrpc.NewCA(l.PKI, "lab CA", time.Hour); err != nil {
		l.t.Fatal(err)
	}
	for name, host := range map[string]string{"h1": "172.31.1.2", "h2": "172.31.2.2", "net": "172.31.3.2", "controller": "", "operator": ""} {
		var hosts []string
		if host != "" {
			hosts = []string{host}
		}
		if err := sockrpc.Issue(l.PKI, l.PKI, name, hosts, time.Hour); err != nil {
			l.t.Fatal(err)
		}
	}
}

// TLS is the certificate files of an end: h1, h2, net (the switches), controller or
// operator.
func (l *Lab) TLS(name string) sockrpc.TLS {
	return sockrpc.TLS{CA: filepath.Join(l.PKI, "ca.pem"), Cert: filepath.Join(l.PKI, name+".pem"), Key: filepath.Join(l.PKI, name+"-key.pem")}
}

// TLSArgs are the CLI flags that make a plait command the end name.
func (l *Lab) TLSArgs(name string) []string {
	if l.PKI == "" {
		return nil
	}
	t := l.TLS(name)
	return []string{"--tls-ca", t.CA, "--tls-cert", t.Cert, "--tls-key", t.Key}
}

// SwitchAddr is switch i's P4Runtime address, as the controller reaches it.
func (l *Lab) SwitchAddr(i int) string {
	if l.PKI == "" {
		return fmt.Sprintf("127.0.0.1:%d", grpcPort(i))
	}
	return fmt.Sprintf("172.31.3.2:%d", grpcPort(i))
}

// AgentAddr is how the controller reaches agent h1 or h2.
func (l *Lab) AgentAddr(h string) string {
	if l.PKI == "" {
		if h == "h1" {
			return l.Sock1
		}
		return l.Sock2
	}
	n := 1
	if h == "h2" {
		n = 2
	}
	return fmt.Sprintf("172.31.%d.2:%d", n, agentPort)
}

// switchTLSArgs serve a switch with mutual TLS, with BMv2's flags.
func (l *Lab) switchTLSArgs() []string {
	if l.PKI == "" {
		return nil
	}
	t := l.TLS("net")
	return []string{"--grpc-server-ssl", "--grpc-server-with-client-auth", "--grpc-server-cacert", t.CA, "--grpc-server-cert", t.Cert, "--grpc-server-key", t.Key}
}

// agentTLSArgs serve an agent's API on its management address too.
func (l *Lab) agentTLSArgs(h string) []string {
	if l.PKI == "" {
		return nil
	}
	return append([]string{"--listen", l.AgentAddr(h)}, l.TLSArgs(h)...)
}
