// Package p4_test runs the conformance vectors in vectors/ (built by gen_vectors.py)
// against the embedded switch always, and against BMv2 when p4c-bm2-ss and
// simple_switch_grpc are installed. Entries and counters are addressed by name through
// the P4Info, as the controller does; registers are never read or written over
// P4Runtime, which BMv2 does not offer. Docs: docs/switch.md.
package p4_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/plait/plait/p4/p4info"
)

// vector is table entries, then steps (packets sent and what leaves), then counters.
// Switch state other than tables (the split's registers) is set up and observed through
// packets only, as BMv2's P4Runtime server offers no register access.
type vector struct {
	Description string  `json:"description"`
	Entries     []entry `json:"entries"`
	Steps       []step  `json:"steps"`
	Counters    []struct {
		Name    string `json:"name"`
		Index   int64  `json:"index"`
		Packets int64  `json:"packets"`
		Bytes   int64  `json:"bytes"`
	} `json:"counters"`
}

// step sends a packet (Repeat times) and expects either exact frames (per port, in
// order) or only how many leave each port.
type step struct {
	Note  string `json:"note"`
	Input struct {
		Port   int      `json:"port"`
		Packet []string `json:"packet"`
	} `json:"input"`
	Repeat int `json:"repeat"`
	Expect []struct {
		Port       int      `json:"port"`
		Packet     []string `json:"packet"`
		Ignore     [][]any  `json:"ignore"`
		BMv2Ignore [][]any  `json:"bmv2_ignore"`
	} `json:"expect"`
	ExpectCounts map[int]int `json:"expect_counts"`
	PacketIn     []struct {
		Metadata map[string]uint64 `json:"metadata"`
		Packet   []string          `json:"packet"`
	} `json:"packet_in"`
}

type entry struct {
	Table   string         `json:"table"`
	Match   map[string]any `json:"match"`
	Action  string         `json:"action"`
	Params  map[string]any `json:"params"`
	Default bool           `json:"default"`
}

// packet joins annotated hex chunks ("0800  # ethernet type").
func packet(t *testing.T, chunks []string) []byte {
	t.Helper()
	var b []byte
	for _, c := range chunks {
		h, _, _ := strings.Cut(c, "#")
		x, err := hex.DecodeString(strings.TrimSpace(h))
		if err != nil {
			t.Fatalf("chunk %q: %v", c, err)
		}
		b = append(b, x...)
	}
	return b
}

func (e entry) build(info *p4info.Info) (*p4v1.TableEntry, error) {
	var params []p4info.Param
	for k, v := range e.Params {
		params = append(params, p4info.P(k, v))
	}
	if e.Default {
		return info.DefaultEntry(e.Table, e.Action, params...)
	}
	var ms []p4info.Match
	for k, v := range e.Match {
		if s, ok := v.(string); ok && strings.Contains(s, "/") {
			addr, plen, _ := strings.Cut(s, "/")
			n, err := strconv.Atoi(plen)
			if err != nil {
				return nil, fmt.Errorf("match %s: %w", k, err)
			}
			ms = append(ms, p4info.LPM(k, addr, n))
			continue
		}
		ms = append(ms, p4info.Exact(k, v))
	}
	return info.TableEntry(e.Table, ms, e.Action, params...)
}

// target is a switch running plait.p4 with ports 1..4 and a P4Runtime client that is
// primary.
type target interface {
	info() *p4info.Info
	client() p4v1.P4RuntimeClient
	inject(port int, frame []byte)
	// collect returns the frames sent on ports 1..4 and the PacketIns until quiet.
	collect() (map[int][][]byte, []*p4v1.PacketIn)
	name() string
}

type output struct {
	port  int
	frame []byte
}

func loadVectors(t *testing.T) map[string]*vector {
	t.Helper()
	files, err := filepath.Glob("vectors/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	vs := map[string]*vector{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		v := &vector{}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		vs[strings.TrimSuffix(filepath.Base(f), ".json")] = v
	}
	return vs
}

func write(ctx context.Context, tg target, typ p4v1.Update_Type, ents ...*p4v1.Entity) error {
	req := &p4v1.WriteRequest{DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 1}}
	for _, e := range ents {
		req.Updates = append(req.Updates, &p4v1.Update{Type: typ, Entity: e})
	}
	_, err := tg.client().Write(ctx, req)
	return err
}

func readOne(ctx context.Context, tg target, e *p4v1.Entity) (*p4v1.Entity, error) {
	st, err := tg.client().Read(ctx, &p4v1.ReadRequest{DeviceId: 1, Entities: []*p4v1.Entity{e}})
	if err != nil {
		return nil, err
	}
	resp, err := st.Recv()
	if err != nil {
		return nil, err
	}
	if len(resp.GetEntities()) != 1 {
		return nil, fmt.Errorf("read %d entities, want 1", len(resp.GetEntities()))
	}
	return resp.GetEntities()[0], nil
}

// run applies one vector to a fresh target.
func run(t *testing.T, v *vector, tg target) {
	ctx := context.Background()
	info := tg.info()
	for _, e := range v.Entries {
		te, err := e.build(info)
		if err != nil {
			t.Fatalf("entry %+v: %v", e, err)
		}
		typ := p4v1.Update_INSERT
		if e.Default {
			typ = p4v1.Update_MODIFY
		}
		if err := write(ctx, tg, typ, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}); err != nil {
			t.Fatalf("write %s: %v", e.Table, err)
		}
	}
	for i, st := range v.Steps {
		frame := packet(t, st.Input.Packet)
		for range max(st.Repeat, 1) {
			tg.inject(st.Input.Port, frame)
		}
		outs, pins := tg.collect()
		checkStep(t, fmt.Sprintf("step %d (%s)", i+1, st.Note), tg.name(), info, &st, outs, pins)
	}
	for _, c := range v.Counters {
		ce, err := info.CounterEntry(c.Name, c.Index)
		if err != nil {
			t.Fatal(err)
		}
		e, err := readOne(ctx, tg, &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: ce}})
		if err != nil {
			t.Fatalf("read %s[%d]: %v", c.Name, c.Index, err)
		}
		d := e.GetCounterEntry().GetData()
		if d.GetPacketCount() != c.Packets || d.GetByteCount() != c.Bytes {
			t.Errorf("%s[%d] = %d packets %d bytes, want %d packets %d bytes", c.Name, c.Index, d.GetPacketCount(), d.GetByteCount(), c.Packets, c.Bytes)
		}
	}
}

func checkStep(t *testing.T, name, target string, info *p4info.Info, st *step, outs map[int][][]byte, pins []*p4v1.PacketIn) {
	t.Helper()
	got := 0
	for _, fs := range outs {
		got += len(fs)
	}
	if st.ExpectCounts != nil {
		want := 0
		for port, n := range st.ExpectCounts {
			want += n
			if len(outs[port]) != n {
				t.Errorf("%s: %d frames on port %d, want %d", name, len(outs[port]), port, n)
			}
		}
		if got != want {
			t.Errorf("%s: %d frames out, want %d", name, got, want)
		}
	} else {
		if got != len(st.Expect) {
			t.Errorf("%s: %d frames out, want %d: %x", name, got, len(st.Expect), outs)
		}
		next := map[int]int{}
		for _, want := range st.Expect {
			k := next[want.Port]
			next[want.Port]++
			if k >= len(outs[want.Port]) {
				t.Errorf("%s: no frame %d on port %d", name, k+1, want.Port)
				continue
			}
			f, w := outs[want.Port][k], packet(t, want.Packet)
			ignore := want.Ignore
			if target == "bmv2" {
				ignore = append(ignore, want.BMv2Ignore...)
			}
			if len(f) == len(w) {
				for _, ig := range ignore {
					off, n := int(ig[0].(float64)), int(ig[1].(float64))
					copy(f[off:off+n], w[off:off+n])
				}
			}
			if !bytes.Equal(f, w) {
				t.Errorf("%s: port %d frame\n got  %x\n want %x", name, want.Port, f, w)
			}
		}
	}
	if len(pins) != len(st.PacketIn) {
		t.Errorf("%s: %d packet-ins, want %d", name, len(pins), len(st.PacketIn))
	}
	for i := 0; i < min(len(pins), len(st.PacketIn)); i++ {
		md, err := info.PacketInMetadata(pins[i])
		if err != nil {
			t.Error(err)
		}
		for k, want := range st.PacketIn[i].Metadata {
			if md[k] != want {
				t.Errorf("%s: packet-in %s = %d, want %d", name, k, md[k], want)
			}
		}
		if w := packet(t, st.PacketIn[i].Packet); !bytes.Equal(pins[i].GetPayload(), w) {
			t.Errorf("%s: packet-in payload\n got  %x\n want %x", name, pins[i].GetPayload(), w)
		}
	}
}

func TestVectorsEmbedded(t *testing.T) {
	for name, v := range loadVectors(t) {
		t.Run(name, func(t *testing.T) {
			t.Log(v.Description)
			run(t, v, newEmbedded(t))
		})
	}
}

// quiet is how long collect waits for more output after the last frame.
const quiet = 150 * time.Millisecond
