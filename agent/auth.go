package agent

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/wire"
)

// tunnelKeys checks a tunnel's authentication settings and returns its keys: one or two,
// or none when authentication is turned off.
func tunnelKeys(cfg *pb.TunnelConfig) ([]wire.Key, error) {
	a := cfg.Auth
	if cfg.ReceiveOnly {
		if len(a.GetKeys()) > 0 {
			return nil, invalid("tunnel %d is receive-only: a split switch's packets carry no tag, leave the keys out", cfg.Id)
		}
		return nil, nil
	}
	switch {
	case a.GetDisabled() && len(a.GetKeys()) > 0:
		return nil, invalid("tunnel %d has keys but authentication turned off: give one or the other", cfg.Id)
	case a.GetDisabled():
		return nil, nil
	case len(a.GetKeys()) == 0:
		return nil, invalid("tunnel %d has no key: give one (plait tunnel add --key-file FILE, the same on both ends; "+
			"plait tunnel genkey FILE makes one), or turn authentication off (--no-auth) where nobody else can reach its paths", cfg.Id)
	case len(a.Keys) > 2:
		return nil, invalid("tunnel %d has %d keys: give one, or two while rolling keys over", cfg.Id, len(a.Keys))
	}
	keys := make([]wire.Key, len(a.Keys))
	for i, k := range a.Keys {
		if len(k) != len(wire.Key{}) {
			return nil, invalid("key %d of tunnel %d is %d bytes: a key is %d bytes (32 hex digits in a key file)", i+1, cfg.Id, len(k), len(wire.Key{}))
		}
		keys[i] = wire.Key(k)
	}
	return keys, nil
}

// KeyID names a key without revealing it: the first 4 bytes of its SHA-256, hex.
func KeyID(k []byte) string {
	sum := sha256.Sum256(k)
	return hex.EncodeToString(sum[:4])
}

// redacted is cfg as the agent shows it: key ids instead of keys.
func redacted(cfg *pb.TunnelConfig) *pb.TunnelConfig {
	out := proto.Clone(cfg).(*pb.TunnelConfig)
	if out.Auth != nil {
		out.Auth.KeyIds = nil
		for _, k := range out.Auth.Keys {
			out.Auth.KeyIds = append(out.Auth.KeyIds, KeyID(k))
		}
		out.Auth.Keys = nil
	}
	return out
}

// SetKeys installs a tunnel's keys, checked as Configure checks them: the receiver takes
// the new ones and the sender tags with the first in one step, and the tunnel's counters
// and replay window go on. Turning authentication on or off changes the tunnel's MTU, so
// that takes a Configure.
func (a *Agent) SetKeys(_ context.Context, req *pb.SetKeysRequest) (*pb.Tunnel, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, err := a.tunnel(req.TunnelId)
	if err != nil {
		return nil, err
	}
	if len(t.keys) == 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "tunnel %d does not authenticate: configure it with a key (plait tunnel add --key-file) before keys can be set", t.cfg.Id)
	}
	next := t.clone()
	next.cfg.Auth = &pb.Auth{Keys: req.Keys}
	if next.keys, err = tunnelKeys(next.cfg); err != nil {
		return nil, err
	}
	if err := a.dp.SetReceiver(next.receiver()); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if err := a.writeSender(next); err != nil {
		return nil, err
	}
	a.tunnels[next.cfg.Id] = next
	ids := make([]string, len(next.keys))
	for i, k := range next.keys {
		ids[i] = KeyID(k[:])
	}
	a.opts.log.Info("keys set", "tunnel", next.cfg.Id, "key_ids", ids)
	return next.proto(), a.save()
}

// ReadKeyFile reads a tunnel key: 32 hex digits (whitespace around them ignored) in a
// file only its owner can read or write, as WireGuard asks of its private keys.
func ReadKeyFile(path string) (wire.Key, error) {
	var k wire.Key
	f, err := os.Open(path)
	if err != nil {
		return k, fmt.Errorf("key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return k, fmt.Errorf("key file: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return k, fmt.Errorf("key file %s is mode %04o, readable or writable by others: chmod 600 %s (and use a new key if others may have read it)", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return k, fmt.Errorf("key file %s: %w", path, err)
	}
	s := strings.TrimSpace(string(b))
	raw, err := hex.DecodeString(s)
	if err != nil || len(raw) != len(k) {
		// Neither the content nor its decoding goes into the message: it may be a key.
		return k, fmt.Errorf("key file %s does not hold 32 hex digits (a %d-byte key): make one with plait tunnel genkey", path, len(k))
	}
	copy(k[:], raw)
	return k, nil
}

// WriteKeyFile makes a random key and writes it to a new file that only its owner can
// read.
func WriteKeyFile(path string) error {
	var k wire.Key
	if _, err := rand.Read(k[:]); err != nil {
		return fmt.Errorf("random key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	if _, err := fmt.Fprintln(f, hex.EncodeToString(k[:])); err != nil {
		f.Close()
		return fmt.Errorf("key file %s: %w", path, err)
	}
	return f.Close()
}
