package sockrpc

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// TLS names one end's certificate files (PEM). A server with CA asks every client for a
// certificate CA signed (mutual TLS); a client with CA believes only servers CA signed,
// and shows Cert when the server asks.
type TLS struct {
	CA, Cert, Key string
}

// Enabled is true when any file is named.
func (t TLS) Enabled() bool { return t.CA != "" || t.Cert != "" || t.Key != "" }

func (t TLS) pool() (*x509.CertPool, error) {
	b, err := os.ReadFile(t.CA)
	if err != nil {
		return nil, fmt.Errorf("TLS CA: %w", err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("TLS CA %s holds no PEM certificate", t.CA)
	}
	return p, nil
}

func (t TLS) pair() ([]tls.Certificate, error) {
	if t.Cert == "" && t.Key == "" {
		return nil, nil
	}
	if t.Cert == "" || t.Key == "" {
		return nil, errors.New("TLS: give both a certificate and its key")
	}
	c, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s / key %s: %w", t.Cert, t.Key, err)
	}
	return []tls.Certificate{c}, nil
}

func (t TLS) server() (*tls.Config, error) {
	certs, err := t.pair()
	if err != nil {
		return nil, err
	}
	if certs == nil {
		return nil, errors.New("TLS: a server needs its certificate and key")
	}
	cfg := &tls.Config{Certificates: certs, MinVersion: tls.VersionTLS12}
	if t.CA != "" {
		if cfg.ClientCAs, err = t.pool(); err != nil {
			return nil, err
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

func (t TLS) client() (*tls.Config, error) {
	certs, err := t.pair()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: certs, MinVersion: tls.VersionTLS12}
	if t.CA != "" {
		if cfg.RootCAs, err = t.pool(); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// Explain turns a TLS failure a client saw into what to do about it; other messages
// come back unchanged.
func Explain(msg string) string {
	hints := []struct{ says, do string }{
		{"certificate required", "the server requires a client certificate: give a certificate and key its CA signed"},
		{"unknown certificate authority", "a certificate is not signed by the CA the other end trusts: use certificates from the same CA"},
		{"bad certificate", "the server refused the client certificate: use one its CA signed, with client use"},
		{"certificate signed by unknown authority", "the server's certificate is not signed by the given CA: give the CA that signed it"},
		{"certificate is valid for", "the server's certificate does not name the address dialled: issue it for that host (plait cert issue --host)"},
		{"first record does not look like a TLS handshake", "the server speaks plaintext: dial it without TLS"},
		{"connection closed before server preface", "the server may want TLS: give a CA, certificate and key"},
		{"error reading server preface: EOF", "the server closed the connection at once: it may want TLS, give a CA, certificate and key"},
		{"certificate has expired", "a certificate has expired: issue a new one"},
		// With TLS 1.3 the server checks the client's certificate after the client
		// thinks the handshake is done; a refusal may then reach it as a closed
		// connection instead of the alert.
		{"broken pipe", "the server closed the connection: if it requires mutual TLS, give a certificate and key its CA signed"},
		{"connection reset by peer", "the server closed the connection: if it requires mutual TLS, give a certificate and key its CA signed"},
	}
	for _, h := range hints {
		if strings.Contains(msg, h.says) {
			return msg + " (" + h.do + ")"
		}
	}
	return msg
}
