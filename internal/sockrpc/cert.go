package sockrpc

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// A lab CA is a directory holding ca.pem (the certificate every end trusts) and
// ca-key.pem (mode 0600, needed only to issue). Certificates are ECDSA P-256 and serve
// both as server and as client certificates, as an agent is a server to the controller
// and the controller a client of agents and switches.

// NewCA makes a CA in dir, valid for validity; it refuses to overwrite one.
func NewCA(dir, name string, validity time.Duration) error {
	if _, err := os.Stat(filepath.Join(dir, "ca-key.pem")); err == nil {
		return fmt.Errorf("%s already holds a CA: remove it first or choose another directory", dir)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl, err := template(name, validity)
	if err != nil {
		return err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("make CA certificate: %w", err)
	}
	return write(dir, "ca", der, key)
}

// Issue makes NAME.pem and NAME-key.pem in out, signed by the CA in caDir, for hosts (IP
// addresses or DNS names a client dials; a client-only certificate needs none).
func Issue(caDir, out, name string, hosts []string, validity time.Duration) error {
	caCert, caKey, err := loadCA(caDir)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl, err := template(name, validity)
	if err != nil {
		return err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("issue certificate %s: %w", name, err)
	}
	return write(out, name, der, key)
}

func template(name string, validity time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name, Organization: []string{"plait"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity)}, nil
}

func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	read := func(f, typ string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, fmt.Errorf("CA: %w (make one with plait cert ca)", err)
		}
		blk, _ := pem.Decode(b)
		if blk == nil || blk.Type != typ {
			return nil, fmt.Errorf("CA: %s holds no PEM %s", f, typ)
		}
		return blk.Bytes, nil
	}
	cb, err := read("ca.pem", "CERTIFICATE")
	if err != nil {
		return nil, nil, err
	}
	kb, err := read("ca-key.pem", "EC PRIVATE KEY")
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(cb)
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb)
	if err != nil {
		return nil, nil, fmt.Errorf("CA key: %w", err)
	}
	if !cert.IsCA {
		return nil, nil, errors.New("CA: ca.pem is not a CA certificate")
	}
	return cert, key, nil
}

func write(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	keyFile := filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}
