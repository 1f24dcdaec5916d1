package p4src

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	"google.golang.org/protobuf/encoding/prototext"
)

var update = flag.Bool("update", false, "rewrite p4/build/plait.p4info.txtpb from p4/plait.p4")

const (
	source  = "../plait.p4"
	p4info  = "../build/plait.p4info.txtpb"
	p4cHint = "p4c-bm2-ss is not on PATH: the checked-in P4Info is compared with the P4Info derived from the source only"
)

func loadP4Info(t *testing.T, path string) *p4configv1.P4Info {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	info := &p4configv1.P4Info{}
	if err := prototext.Unmarshal(b, info); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return info
}

// The checked-in P4Info must be, byte for byte, what the source gives (and so what p4c
// writes); -update rewrites it.
func TestP4InfoMatchesSource(t *testing.T) {
	prog, err := ParseFile(source)
	if err != nil {
		t.Fatal(err)
	}
	derived := prog.P4Info()
	text := TextFormat(derived)
	if *update {
		if err := os.WriteFile(p4info, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if d := Diff(derived, loadP4Info(t, p4info)); d != "" {
		t.Errorf("%s differs from the P4Info of %s (-derived +checked in); run go test ./p4/p4src -update after changing plait.p4:\n%s", p4info, source, d)
	}
	if b, err := os.ReadFile(p4info); err == nil && string(b) != text {
		t.Errorf("%s holds the right P4Info but not as p4c prints it; run go test ./p4/p4src -update", p4info)
	}
}

// With p4c installed, the checked-in P4Info must be the P4Info p4c writes, as a whole
// message.
func TestP4InfoMatchesP4c(t *testing.T) {
	if _, err := exec.LookPath("p4c-bm2-ss"); err != nil {
		t.Skip(p4cHint)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "plait.p4info.txtpb")
	cmd := exec.Command("p4c-bm2-ss", "--arch", "v1model", "-o", filepath.Join(dir, "plait.json"), "--p4runtime-files", out, source)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("p4c-bm2-ss: %v\n%s", err, b)
	}
	if d := Diff(loadP4Info(t, out), loadP4Info(t, p4info)); d != "" {
		t.Errorf("checked-in P4Info differs from p4c's (-p4c +checked in):\n%s", d)
	}
	p4cText, _ := os.ReadFile(out)
	if mine, _ := os.ReadFile(p4info); string(mine) != string(p4cText) {
		t.Logf("same message, printed otherwise (entity order or spacing): make p4 would rewrite %s", p4info)
	}
}

// Diff must notice any change a P4Runtime client could see, and only those.
func TestDiffDetects(t *testing.T) {
	base := loadP4Info(t, p4info)
	cases := []struct {
		name   string
		mutate func(*p4configv1.P4Info)
		want   string // in the diff; "" for no difference
	}{
		{"renamed table", func(i *p4configv1.P4Info) { i.Tables[0].Preamble.Name += "x" }, "name"},
		{"match width", func(i *p4configv1.P4Info) { i.Tables[0].MatchFields[0].Bitwidth++ }, "bitwidth"},
		{"param width", func(i *p4configv1.P4Info) {
			for _, a := range i.Actions {
				if len(a.Params) > 0 {
					a.Params[0].Bitwidth++
					return
				}
			}
		}, "bitwidth"},
		{"register size", func(i *p4configv1.P4Info) { i.Registers[0].Size++ }, "size"},
		{"counter unit", func(i *p4configv1.P4Info) { i.Counters[0].Spec.Unit = p4configv1.CounterSpec_PACKETS }, "unit"},
		{"controller header id", func(i *p4configv1.P4Info) { i.ControllerPacketMetadata[0].Preamble.Id = 71217884 }, "id"},
		{"alias", func(i *p4configv1.P4Info) { i.Actions[1].Preamble.Alias = i.Actions[1].Preamble.Name }, "alias"},
		{"no initial default action", func(i *p4configv1.P4Info) { i.Tables[0].InitialDefaultAction = nil }, "initial_default_action"},
		{"no type_info", func(i *p4configv1.P4Info) { i.TypeInfo = nil }, "type_info"},
		{"dropped action ref", func(i *p4configv1.P4Info) { i.Tables[0].ActionRefs = i.Tables[0].ActionRefs[1:] }, "action_refs"},
		{"tables reordered", func(i *p4configv1.P4Info) { i.Tables[0], i.Tables[1] = i.Tables[1], i.Tables[0] }, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := loadP4Info(t, p4info)
			c.mutate(got)
			d := Diff(base, got)
			if c.want == "" && d != "" || c.want != "" && !strings.Contains(d, c.want) {
				t.Errorf("diff:\n%s\nwant one mentioning %q", d, c.want)
			}
		})
	}
}

// p4c's controller header IDs, as p4c 1.2.5.16 assigned them to plait.p4 (from the type
// names packet_in_t and packet_out_t, not the @controller_header names).
func TestControllerHeaderIDs(t *testing.T) {
	want := map[string]uint32{"packet_in": 80671331, "packet_out": 75327753}
	for _, m := range loadP4Info(t, p4info).ControllerPacketMetadata {
		if m.Preamble.Id != want[m.Preamble.Name] {
			t.Errorf("%s id %d, p4c assigns %d", m.Preamble.Name, m.Preamble.Id, want[m.Preamble.Name])
		}
	}
}

// p4c's IDs: the hash must reproduce an ID p4c is known to assign (NoAction is the same
// in every v1model program).
func TestJenkinsMatchesP4c(t *testing.T) {
	if got := uint32(p4configv1.P4Ids_ACTION)<<24 | jenkins("NoAction")&0xffffff; got != 21257015 {
		t.Errorf("NoAction id %d, p4c assigns 21257015", got)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"unknown member", "control C(inout headers_t hdr) { table t { key = { hdr.nope.x: exact; } actions = { NoAction; } size = 1; default_action = NoAction(); } apply {} }", "no member"},
		{"unknown root", "control C() { table t { key = { foo.x: exact; } actions = { NoAction; } size = 1; default_action = NoAction(); } apply {} }", "unknown root"},
		{"no size", "header h_t { bit<8> a; } struct headers_t { h_t h; } control C(inout headers_t hdr) { table t { key = { hdr.h.a: exact; } actions = { NoAction; } default_action = NoAction(); } apply {} }", "no size"},
		{"bad param", "control C() { action a(bool x) { } apply {} }", "unsupported parameter"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.src)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want %q", err, c.want)
			}
		})
	}
}
