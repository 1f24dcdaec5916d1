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

// The checked-in P4Info must say what plait.p4 says; -update rewrites it.
func TestP4InfoMatchesSource(t *testing.T) {
	prog, err := ParseFile(source)
	if err != nil {
		t.Fatal(err)
	}
	derived := prog.P4Info()
	if *update {
		if err := os.WriteFile(p4info, []byte(TextFormat(derived)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range Compare(derived, loadP4Info(t, p4info)) {
		t.Errorf("%s: %s (run go test ./p4/p4src -update after changing plait.p4)", p4info, d)
	}
}

// With p4c installed, the checked-in P4Info must also agree with what p4c emits.
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
	for _, d := range Compare(loadP4Info(t, out), loadP4Info(t, p4info)) {
		t.Errorf("checked-in P4Info differs from p4c's: %s", d)
	}
}

// Compare must notice the changes that break a client resolving by name.
func TestCompareDetects(t *testing.T) {
	base := loadP4Info(t, p4info)
	cases := []struct {
		name   string
		mutate func(*p4configv1.P4Info)
		want   string
	}{
		{"renamed table", func(i *p4configv1.P4Info) { i.Tables[0].Preamble.Name += "x" }, "table"},
		{"match width", func(i *p4configv1.P4Info) { i.Tables[0].MatchFields[0].Bitwidth++ }, "match field"},
		{"param width", func(i *p4configv1.P4Info) {
			for _, a := range i.Actions {
				if len(a.Params) > 0 {
					a.Params[0].Bitwidth++
					return
				}
			}
		}, "param"},
		{"register size", func(i *p4configv1.P4Info) { i.Registers[0].Size++ }, "register"},
		{"counter unit", func(i *p4configv1.P4Info) { i.Counters[0].Spec.Unit = p4configv1.CounterSpec_PACKETS }, "counter"},
		{"id prefix", func(i *p4configv1.P4Info) { i.Actions[0].Preamble.Id &= 0xffffff }, "prefix"},
		{"dropped action ref", func(i *p4configv1.P4Info) { i.Tables[0].ActionRefs = i.Tables[0].ActionRefs[1:] }, "missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := loadP4Info(t, p4info)
			c.mutate(got)
			diffs := Compare(base, got)
			if len(diffs) == 0 || !strings.Contains(strings.Join(diffs, "\n"), c.want) {
				t.Errorf("diffs %q, want one mentioning %q", diffs, c.want)
			}
		})
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
