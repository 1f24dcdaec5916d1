package p4_test

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plait/plait/p4/p4switch"
	"google.golang.org/grpc"
)

// p4runtime-shell (PyPI, installed into .venv by make deps) talks to the embedded switch
// over a real socket: it pushes the P4Info and a device config, and inserts, reads and
// deletes entries of every table by name.
func TestP4RuntimeShell(t *testing.T) {
	python := "../../.venv/bin/python"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("p4runtime-shell is not installed (%v): run make deps", err)
	}
	if err := exec.Command(python, "-c", "import p4runtime_sh").Run(); err != nil {
		t.Skipf("p4runtime-shell does not import (%v): run make deps", err)
	}
	var opts []p4switch.Option
	for i := 1; i <= 4; i++ {
		opts = append(opts, p4switch.WithPort(uint16(i), p4switch.NewMemPort("mem"), p4switch.LinkParams{}))
	}
	sw, err := p4switch.New(append(opts, p4switch.WithoutPipeline())...)
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Start(); err != nil {
		t.Fatal(err)
	}
	defer sw.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	sw.Register(g)
	go g.Serve(lis)
	defer g.Stop()

	devConfig := filepath.Join(t.TempDir(), "plait.json")
	if err := os.WriteFile(devConfig, []byte(`{"program": "p4/plait.p4", "__meta__": {"note": "stands in for p4c-bm2-ss output"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "p4rt_shell_client.py", lis.Addr().String(), "../build/plait.p4info.txtpb", devConfig)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("p4runtime-shell: %v\n%s\n%s", err, stdout, stderr.String())
	}
	type step struct {
		Step, Table, Action, Name string
		Count, Cells              int
		Error                     *string
	}
	var steps []step
	sc := bufio.NewScanner(strings.NewReader(string(stdout)))
	for sc.Scan() {
		var s step
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		steps = append(steps, s)
	}
	tables := map[string]bool{}
	for _, s := range steps {
		switch s.Step {
		case "inserted":
			tables[s.Table] = true
			if s.Count != 1 || s.Action == "" {
				t.Errorf("%s: read %d entries with action %q after insert, want 1", s.Table, s.Count, s.Action)
			}
		case "deleted":
			if s.Count != 0 {
				t.Errorf("%s: %d entries after delete", s.Table, s.Count)
			}
		case "default":
			if !strings.HasSuffix(s.Action, "drop") {
				t.Errorf("default action of ipv4_lpm reads as %q, want drop", s.Action)
			}
		case "counter":
			if s.Cells != 512 {
				t.Errorf("port_rx_counter read %d cells, want 512", s.Cells)
			}
		case "duplicate":
			if s.Error == nil || !strings.Contains(*s.Error, "ALREADY_EXISTS") {
				t.Errorf("duplicate insert: %v, want ALREADY_EXISTS", s.Error)
			}
		}
	}
	if len(tables) != 6 {
		t.Errorf("p4runtime-shell exercised %d tables, want all 6: %s", len(tables), stdout)
	}
	t.Logf("p4runtime-shell:\n%s", stdout)
}
