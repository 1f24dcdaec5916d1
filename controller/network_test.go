package controller

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plait/plait/agent"
)

const goodNetwork = `
interval: 50ms
agents: {h1: /run/h1.sock, h2: /run/h2.sock}
switches:
  s1: {address: 127.0.0.1:9601, forward: {1: 2, 2: 1}}
  s0:
    address: 127.0.0.1:9600
    splits:
      - tunnel: 1
        from: h1
        index: 3
        in_port: 1
        prefix: 10.99.0.0/24
        paths:
          - {name: a, port: 2, src_mac: "02:00:00:00:00:01", dst_mac: "02:00:00:00:00:02", src_ip: 10.0.1.1, dst_ip: 10.0.1.2}
tunnels:
  - {id: 1, hosts: [h1, h2], mode: wrr, weights: [1, 2]}
`

func TestParseNetwork(t *testing.T) {
	n, err := ParseNetwork([]byte(goodNetwork))
	if err != nil {
		t.Fatal(err)
	}
	if n.Interval != 50*time.Millisecond || n.Switches["s1"].Forward[1] != 2 || n.Switches["s1"].ElectionID != 10 ||
		n.Switches["s0"].Splits[0].Paths[0].DstIP.String() != "10.0.1.2" || n.Tunnels[0].Mode != "wrr" {
		t.Fatalf("parsed %+v", n)
	}
	bad := map[string][2]string{
		"interval":      {"interval: 50ms", "interval: 1ms"},
		"agent socket":  {"h2: /run/h2.sock", "h2: ''"},
		"address":       {"127.0.0.1:9601", "nowhere"},
		"tunnel host":   {"hosts: [h1, h2]", "hosts: [h1, h9]"},
		"mode":          {"mode: wrr", "mode: fastest"},
		"split from":    {"from: h1", "from: h7"},
		"split index":   {"index: 3", "index: 64"},
		"split prefix":  {"prefix: 10.99.0.0/24", "prefix: nope"},
		"split mac":     {`dst_mac: "02:00:00:00:00:02"`, `dst_mac: "zz"`},
		"unknown field": {"interval: 50ms", "interval: 50ms\nintreval: 1s"},
		"weight NaN":    {"weights: [1, 2]", "weights: [1, .nan]"},
		"weight inf":    {"weights: [1, 2]", "weights: [.inf, 2]"},
		"weight neg":    {"weights: [1, 2]", "weights: [1, -2]"},
		"weight huge":   {"weights: [1, 2]", "weights: [1e308, 1e308]"},
		"weights zero":  {"weights: [1, 2]", "weights: [0, 0]"},
	}
	want := map[string]string{
		"interval": "interval", "agent socket": "agents.h2", "address": "switches.s1.address", "tunnel host": "hosts",
		"mode": "mode", "split from": "from", "split index": "index", "split prefix": "prefix", "split mac": "dst_mac",
		"unknown field": "intreval", "weight NaN": "weights: weight 2 is NaN", "weight inf": "weights: weight 1 is +Inf",
		"weight neg": "must not be negative", "weight huge": "smaller scale", "weights zero": "positive weight",
	}
	for name, r := range bad {
		_, err := ParseNetwork([]byte(strings.Replace(goodNetwork, r[0], r[1], 1)))
		if err == nil || !strings.Contains(err.Error(), want[name]) {
			t.Errorf("%s: error %v, want one naming %q", name, err, want[name])
		}
	}
}

// Key files named by the network file are read and checked at load; a tunnel's keys
// print as their ids, whatever the verb.
func TestNetworkKeys(t *testing.T) {
	dir := t.TempDir()
	good, loose := filepath.Join(dir, "good.key"), filepath.Join(dir, "loose.key")
	if err := agent.WriteKeyFile(good); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(loose, []byte("00112233445566778899aabbccddeeff\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(loose, 0o644)
	withKeys := func(files ...string) string {
		return strings.Replace(goodNetwork, "weights: [1, 2]}", "weights: [1, 2], keys: ["+strings.Join(files, ", ")+"]}", 1)
	}
	n, err := ParseNetwork([]byte(withKeys(good)))
	if err != nil {
		t.Fatal(err)
	}
	k, _ := agent.ReadKeyFile(good)
	for _, v := range []string{fmt.Sprint(n.Tunnels[0]), fmt.Sprintf("%+v", *n.Tunnels[0]), fmt.Sprintf("%#v", *n.Tunnels[0])} {
		if strings.Contains(v, hex.EncodeToString(k[:])) || strings.Contains(v, fmt.Sprint(k[:])) || !strings.Contains(v, agent.KeyID(k[:])) {
			t.Errorf("a tunnel prints as %s: want its key's id, not the key", v)
		}
	}
	for name, c := range map[string]struct {
		files []string
		want  string
	}{
		"readable by others": {[]string{loose}, "tunnels[id 1].keys: key file " + loose + " is mode 0644"},
		"three":              {[]string{good, good, good}, "3 key files"},
		"missing":            {[]string{filepath.Join(dir, "none")}, "no such file"},
	} {
		_, err := ParseNetwork([]byte(withKeys(c.files...)))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "00112233") {
			t.Errorf("%s: %v; want an error saying %q", name, err, c.want)
		}
	}
}
