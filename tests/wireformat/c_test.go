package wireformat

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/plait/plait/ebpf/datapath"
	"github.com/plait/plait/split"
	"github.com/plait/plait/wire"
)

// TestCLayout compiles ebpf/include/plait.h the way the datapath is compiled (clang, BPF
// target, the same flags), reads struct plait_hdr and plait_tel from the object's BTF and
// checks them against wire.Layout: names, bit offsets, sizes, and a big-endian typedef
// (__be16/__be32) for every multi-byte field. C cannot address a nibble, so consecutive
// sub-byte layout fields form one C member (version + flags = ver_flags). The constants
// plait.h defines are checked against wire's too, and consts.h's wrr table length, tunnel
// slots and ACK size against split's and the datapath's, through an enum that carries them
// into BTF.
func TestCLayout(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "layout.c")
	// Globals put the structs into BTF; the programs only use them through pointers.
	if err := os.WriteFile(src, []byte(`#include "plait.h"
#include "consts.h"
struct plait_hdr h;
struct plait_tel t;
enum plait_consts {
	c_version = PLAIT_VERSION, c_udp_port = PLAIT_UDP_PORT, c_ipproto = PLAIT_IPPROTO,
	c_f_probe = PLAIT_F_PROBE, c_f_telemetry = PLAIT_F_TELEMETRY, c_f_compact = PLAIT_F_COMPACT,
	c_f_auth = PLAIT_F_AUTH, c_path_repair = PLAIT_PATH_REPAIR, c_tag_len = PLAIT_TAG_LEN, c_tag_cover = PLAIT_TAG_COVER,
	c_max_paths = PLAIT_MAX_PATHS, c_encap_len = PLAIT_ENCAP_LEN, c_compact_len = PLAIT_COMPACT_LEN,
	c_ip_encap_len = PLAIT_IP_ENCAP_LEN, c_ip_compact_len = PLAIT_IP_COMPACT_LEN, c_tel_len = PLAIT_TEL_LEN,
	c_wrr_slots = WRR_SLOTS, c_max_tunnels = MAX_TUNNELS, c_reseq_eth_p = RESEQ_ETH_P,
	c_ack_max_inner = ACK_MAX_INNER,
} c;
`), 0o644); err != nil {
		t.Fatal(err)
	}
	obj := filepath.Join(dir, "layout.o")
	cmd := exec.Command("clang", "-target", "bpf", "-O2", "-g", "-mcpu=v3", "-I../../ebpf/include",
		"-I/usr/include/"+archDir(), "-c", src, "-o", obj)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compile plait.h: %v\n%s", err, out)
	}
	spec, err := btf.LoadSpec(obj)
	if err != nil {
		t.Fatal(err)
	}
	var consts *btf.Enum
	if err := spec.TypeByName("plait_consts", &consts); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{
		"c_version": wire.Version, "c_udp_port": wire.Port, "c_ipproto": wire.IPProto,
		"c_f_probe": wire.FlagProbe, "c_f_telemetry": wire.FlagTelemetry, "c_f_compact": wire.FlagCompact,
		"c_f_auth": wire.FlagAuth, "c_path_repair": wire.PathRepair, "c_tag_len": wire.TagLen, "c_tag_cover": wire.TagCover,
		"c_max_paths": wire.MaxPaths, "c_encap_len": wire.EncapLen, "c_compact_len": wire.CompactLen,
		"c_ip_encap_len": wire.IPEncapLen, "c_ip_compact_len": wire.IPCompactLen, "c_tel_len": wire.TelemetryLen,
		"c_wrr_slots": split.HostSlots, "c_max_tunnels": datapath.MaxTunnels,
		"c_reseq_eth_p": datapath.ReseqEtherType, "c_ack_max_inner": datapath.AckMaxInner,
	}
	for _, v := range consts.Values {
		if v.Value != want[v.Name] {
			t.Errorf("C %s = %d, Go %d", strings.TrimPrefix(v.Name, "c_"), v.Value, want[v.Name])
		}
	}
	if len(consts.Values) != len(want) {
		t.Errorf("%d constants compared, want %d", len(consts.Values), len(want))
	}
	for name, fields := range wire.Layout {
		var st *btf.Struct
		if err := spec.TypeByName(name, &st); err != nil {
			t.Fatalf("struct %s: %v", name, err)
		}
		var want []wire.Field
		for i := 0; i < len(fields); i++ {
			f := fields[i]
			if f.Bits < 8 {
				names := []string{}
				start := f.BitOff
				bits := 0
				for ; i < len(fields) && bits < 8; i++ {
					bits += fields[i].Bits
					names = append(names, fields[i].Name)
				}
				i--
				f = wire.Field{Name: names[0][:3] + "_" + names[1], BitOff: start, Bits: bits}
			}
			want = append(want, f)
		}
		if len(st.Members) != len(want) {
			t.Errorf("C struct %s has %d members, wire.Layout %d", name, len(st.Members), len(want))
			continue
		}
		for i, m := range st.Members {
			w := want[i]
			size, err := btf.Sizeof(m.Type)
			if err != nil {
				t.Fatal(err)
			}
			if m.Name != w.Name || int(m.Offset) != w.BitOff || size*8 != w.Bits {
				t.Errorf("C %s.%s at bit %d, %d bits; wire.Layout %s at bit %d, %d bits", name, m.Name, m.Offset, size*8, w.Name, w.BitOff, w.Bits)
			}
			if td, ok := m.Type.(*btf.Typedef); w.Bits > 8 && (!ok || !strings.HasPrefix(td.Name, "__be")) {
				t.Errorf("C %s.%s is %v, want a big-endian __be%d", name, m.Name, m.Type, w.Bits)
			}
		}
		if size, _ := btf.Sizeof(st); size*8 != sum(fields) {
			t.Errorf("C struct %s is %d bytes, wire.Layout %d bits", name, size, sum(fields))
		}
	}
}

func archDir() string {
	if runtime.GOARCH == "arm64" {
		return "aarch64-linux-gnu"
	}
	return "x86_64-linux-gnu"
}

func sum(fs []wire.Field) int {
	n := 0
	for _, f := range fs {
		n += f.Bits
	}
	return n
}
