// Package p4src reads the subset of P4_16 that p4/plait.p4 uses (header layouts, tables,
// actions, counters, registers, controller headers) and derives from it the P4Info that
// p4c would emit, so that the checked-in P4Info and the wire-format test can be checked
// against the source on machines without p4c. Docs: docs/switch.md.
package p4src

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Field is one field of a header type, in wire order.
type Field struct {
	Name string
	Bits int
}

// Header is a header type.
type Header struct {
	Name             string
	Fields           []Field
	ControllerHeader string // @controller_header name, if any
}

// Key is one match field of a table.
type Key struct {
	Expr  string // as written, e.g. hdr.ipv4.dst_addr
	Match string // exact, lpm, ternary, range, optional
	Bits  int
}

// Table is a match-action table; names are fully qualified (Control.name).
type Table struct {
	Name          string
	Keys          []Key
	Actions       []string // fully qualified, NoAction as is
	Size          int
	DefaultAction string
}

// Param is an action parameter.
type Param struct {
	Name string
	Bits int
}

// Action is an action declared in a control.
type Action struct {
	Name   string
	Params []Param
}

// Counter is an indexed counter.
type Counter struct {
	Name string
	Unit string // packets, bytes, packets_and_bytes
	Size int
}

// Register is a register array of bit<Bits> cells.
type Register struct {
	Name string
	Bits int
	Size int
}

// Program is what the P4Info and the wire-format test need from a P4 program.
type Program struct {
	Headers   map[string]*Header
	Tables    []*Table
	Actions   []*Action
	Counters  []*Counter
	Registers []*Register
	Consts    map[string]int64
	Defines   map[string]int64             // numeric #define values (MAX_TUNNELS, ...), after expansion
	structs   map[string]map[string]string // struct type -> member -> type
	headers   []string                     // header types in declaration order
}

// ControllerHeaders lists the @controller_header types in declaration order, the order
// p4c emits them in.
func (p *Program) ControllerHeaders() []*Header {
	var hs []*Header
	for _, name := range p.headers {
		if h := p.Headers[name]; h.ControllerHeader != "" {
			hs = append(hs, h)
		}
	}
	return hs
}

// v1model's standard_metadata fields that the program may use as keys.
var standardMetadata = map[string]int{
	"ingress_port": 9, "egress_spec": 9, "egress_port": 9, "instance_type": 32,
	"packet_length": 32, "enq_timestamp": 32, "enq_qdepth": 19, "deq_timedelta": 32,
	"deq_qdepth": 19, "ingress_global_timestamp": 48, "egress_global_timestamp": 48,
	"mcast_grp": 16, "egress_rid": 16, "checksum_error": 1, "priority": 3,
}

// ParseFile reads a P4 program, following #include "..." relative to the including file
// (system includes such as <core.p4> are skipped).
func ParseFile(path string) (*Program, error) {
	defines := map[string]string{}
	src, err := preprocess(path, defines)
	if err != nil {
		return nil, err
	}
	p, err := Parse(src)
	if err != nil {
		return nil, err
	}
	for name, v := range defines {
		if n, err := p.eval(v); err == nil {
			p.Defines[name] = n
		}
	}
	return p, nil
}

var (
	reInclude = regexp.MustCompile(`^\s*#include\s+"([^"]+)"`)
	reDefine  = regexp.MustCompile(`^\s*#define\s+(\w+)\s+(.+?)\s*$`)
	reIfndef  = regexp.MustCompile(`^\s*#ifndef\s+(\w+)`)
)

// preprocess expands includes and #define constants; #ifndef guards only skip when the
// macro is defined (enough for include guards and overridable sizes).
func preprocess(path string, defines map[string]string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read p4 source: %w", err)
	}
	var out strings.Builder
	skip := 0
	for _, line := range strings.Split(stripComments(string(b)), "\n") {
		t := strings.TrimSpace(line)
		switch {
		case skip > 0:
			if strings.HasPrefix(t, "#if") {
				skip++
			} else if strings.HasPrefix(t, "#endif") {
				skip--
			}
			continue
		case reIfndef.MatchString(t):
			if _, ok := defines[reIfndef.FindStringSubmatch(t)[1]]; ok {
				skip = 1
			}
			continue
		case reInclude.MatchString(t):
			inc := filepath.Join(filepath.Dir(path), reInclude.FindStringSubmatch(t)[1])
			s, err := preprocess(inc, defines)
			if err != nil {
				return "", err
			}
			out.WriteString(s)
			continue
		case reDefine.MatchString(t):
			m := reDefine.FindStringSubmatch(t)
			defines[m[1]] = expand(m[2], defines)
			continue
		case strings.HasPrefix(t, "#"):
			continue
		}
		out.WriteString(expand(line, defines))
		out.WriteByte('\n')
	}
	return out.String(), nil
}

var reIdent = regexp.MustCompile(`\b[A-Za-z_]\w*\b`)

func expand(s string, defines map[string]string) string {
	return reIdent.ReplaceAllStringFunc(s, func(id string) string {
		if v, ok := defines[id]; ok {
			return v
		}
		return id
	})
}

func stripComments(s string) string {
	s = regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllStringFunc(s, func(c string) string {
		return strings.Repeat("\n", strings.Count(c, "\n"))
	})
	return regexp.MustCompile(`//[^\n]*`).ReplaceAllString(s, "")
}

var (
	reConst    = regexp.MustCompile(`const\s+bit<\d+>\s+(\w+)\s*=\s*([^;]+);`)
	reHeader   = regexp.MustCompile(`(?:@controller_header\("(\w+)"\)\s*)?header\s+(\w+)\s*\{([^}]*)\}`)
	reStruct   = regexp.MustCompile(`struct\s+(\w+)\s*\{([^}]*)\}`)
	reBitField = regexp.MustCompile(`bit<(\d+)>\s+(\w+)\s*;`)
	reMember   = regexp.MustCompile(`(\w+)\s+(\w+)\s*;`)
	reControl  = regexp.MustCompile(`\bcontrol\s+(\w+)\s*\(`)
	reAction   = regexp.MustCompile(`\baction\s+(\w+)\s*\(([^)]*)\)`)
	reParam    = regexp.MustCompile(`^(?:in\s+|out\s+|inout\s+)?bit<(\d+)>\s+(\w+)$`)
	reTable    = regexp.MustCompile(`\btable\s+(\w+)\s*\{`)
	reKeys     = regexp.MustCompile(`key\s*=\s*\{([^}]*)\}`)
	reKey      = regexp.MustCompile(`([\w.\[\]:]+)\s*:\s*(\w+)\s*;`)
	reActions  = regexp.MustCompile(`actions\s*=\s*\{([^}]*)\}`)
	reSize     = regexp.MustCompile(`\bsize\s*=\s*([^;]+);`)
	reDefault  = regexp.MustCompile(`default_action\s*=\s*(\w+)\s*\(`)
	reCounter  = regexp.MustCompile(`\bcounter\s*\(\s*([^,]+),\s*CounterType\.(\w+)\s*\)\s*(\w+)\s*;`)
	reRegister = regexp.MustCompile(`\bregister\s*<\s*bit<(\d+)>\s*>\s*\(\s*([^)]+)\)\s*(\w+)\s*;`)
)

// Parse reads preprocessed P4 source.
func Parse(src string) (*Program, error) {
	p := &Program{
		Headers: map[string]*Header{},
		Consts:  map[string]int64{},
		Defines: map[string]int64{},
		structs: map[string]map[string]string{},
	}
	for _, m := range reConst.FindAllStringSubmatch(src, -1) {
		v, err := p.eval(m[2])
		if err != nil {
			return nil, fmt.Errorf("const %s: %w", m[1], err)
		}
		p.Consts[m[1]] = v
	}
	for _, m := range reHeader.FindAllStringSubmatch(src, -1) {
		h := &Header{Name: m[2], ControllerHeader: m[1]}
		for _, f := range reBitField.FindAllStringSubmatch(m[3], -1) {
			bits, _ := strconv.Atoi(f[1])
			h.Fields = append(h.Fields, Field{Name: f[2], Bits: bits})
		}
		p.Headers[h.Name] = h
		p.headers = append(p.headers, h.Name)
	}
	for _, m := range reStruct.FindAllStringSubmatch(src, -1) {
		members := map[string]string{}
		for _, f := range reMember.FindAllStringSubmatch(m[2], -1) {
			members[f[2]] = f[1]
		}
		for _, f := range reBitField.FindAllStringSubmatch(m[2], -1) {
			members[f[2]] = "bit<" + f[1] + ">"
		}
		p.structs[m[1]] = members
	}
	for _, loc := range reControl.FindAllStringSubmatchIndex(src, -1) {
		name := src[loc[2]:loc[3]]
		body, err := block(src, loc[1])
		if err != nil {
			return nil, fmt.Errorf("control %s: %w", name, err)
		}
		if err := p.parseControl(name, body); err != nil {
			return nil, fmt.Errorf("control %s: %w", name, err)
		}
	}
	return p, nil
}

// block returns the text between the first '{' at or after i and its matching '}'.
func block(src string, i int) (string, error) {
	start := strings.IndexByte(src[i:], '{')
	if start < 0 {
		return "", fmt.Errorf("no body")
	}
	start += i
	depth := 0
	for j := start; j < len(src); j++ {
		switch src[j] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return src[start+1 : j], nil
			}
		}
	}
	return "", fmt.Errorf("unbalanced braces")
}

// controlParams maps the control's parameter names to their types (hdr -> headers_t).
var reCtlParam = regexp.MustCompile(`(?:in|out|inout)\s+(\w+)\s+(\w+)`)

func (p *Program) parseControl(name, body string) error {
	for _, m := range reAction.FindAllStringSubmatch(body, -1) {
		a := &Action{Name: name + "." + m[1]}
		for _, raw := range strings.Split(m[2], ",") {
			raw = strings.TrimSpace(raw)
			if raw == "" {
				continue
			}
			pm := reParam.FindStringSubmatch(raw)
			if pm == nil {
				return fmt.Errorf("action %s: unsupported parameter %q", m[1], raw)
			}
			bits, _ := strconv.Atoi(pm[1])
			a.Params = append(a.Params, Param{Name: pm[2], Bits: bits})
		}
		p.Actions = append(p.Actions, a)
	}
	for _, loc := range reTable.FindAllStringSubmatchIndex(body, -1) {
		tname := body[loc[2]:loc[3]]
		tb, err := block(body, loc[1]-1)
		if err != nil {
			return fmt.Errorf("table %s: %w", tname, err)
		}
		t := &Table{Name: name + "." + tname}
		if km := reKeys.FindStringSubmatch(tb); km != nil {
			for _, k := range reKey.FindAllStringSubmatch(km[1], -1) {
				bits, err := p.width(k[1])
				if err != nil {
					return fmt.Errorf("table %s: %w", tname, err)
				}
				t.Keys = append(t.Keys, Key{Expr: k[1], Match: k[2], Bits: bits})
			}
		}
		am := reActions.FindStringSubmatch(tb)
		if am == nil {
			return fmt.Errorf("table %s: no actions", tname)
		}
		for _, a := range strings.Split(am[1], ";") {
			if a = strings.TrimSpace(a); a != "" {
				t.Actions = append(t.Actions, p.qualify(name, a))
			}
		}
		sm := reSize.FindStringSubmatch(tb)
		if sm == nil {
			return fmt.Errorf("table %s: no size", tname)
		}
		size, err := p.eval(sm[1])
		if err != nil {
			return fmt.Errorf("table %s size: %w", tname, err)
		}
		t.Size = int(size)
		dm := reDefault.FindStringSubmatch(tb)
		if dm == nil {
			return fmt.Errorf("table %s: no default_action", tname)
		}
		t.DefaultAction = p.qualify(name, dm[1])
		p.Tables = append(p.Tables, t)
	}
	for _, m := range reCounter.FindAllStringSubmatch(body, -1) {
		size, err := p.eval(m[1])
		if err != nil {
			return fmt.Errorf("counter %s: %w", m[3], err)
		}
		p.Counters = append(p.Counters, &Counter{Name: name + "." + m[3], Unit: m[2], Size: int(size)})
	}
	for _, m := range reRegister.FindAllStringSubmatch(body, -1) {
		size, err := p.eval(m[2])
		if err != nil {
			return fmt.Errorf("register %s: %w", m[3], err)
		}
		bits, _ := strconv.Atoi(m[1])
		p.Registers = append(p.Registers, &Register{Name: name + "." + m[3], Bits: bits, Size: int(size)})
	}
	return nil
}

// qualify names an action as p4c does: actions of the control get its prefix, core
// actions (NoAction) stay global.
func (p *Program) qualify(control, action string) string {
	if action == "NoAction" {
		return action
	}
	return control + "." + action
}

// width resolves a key expression such as hdr.ipv4.dst_addr, meta.slot or
// standard_metadata.ingress_port to its bit width.
func (p *Program) width(expr string) (int, error) {
	parts := strings.Split(expr, ".")
	if len(parts) == 2 && parts[0] == "standard_metadata" {
		if w, ok := standardMetadata[parts[1]]; ok {
			return w, nil
		}
		return 0, fmt.Errorf("unknown standard_metadata field %q", parts[1])
	}
	root := map[string]string{"hdr": "headers_t", "meta": "metadata_t"}[parts[0]]
	if root == "" {
		return 0, fmt.Errorf("key %q: unknown root %q", expr, parts[0])
	}
	typ := root
	for _, part := range parts[1:] {
		if s, ok := p.structs[typ]; ok {
			typ = s[part]
		} else if h, ok := p.Headers[typ]; ok {
			typ = ""
			for _, f := range h.Fields {
				if f.Name == part {
					typ = fmt.Sprintf("bit<%d>", f.Bits)
				}
			}
		} else {
			typ = ""
		}
		if typ == "" {
			return 0, fmt.Errorf("key %q: no member %q", expr, part)
		}
	}
	var w int
	if _, err := fmt.Sscanf(typ, "bit<%d>", &w); err != nil {
		return 0, fmt.Errorf("key %q has type %s, want bit<W>", expr, typ)
	}
	return w, nil
}

// eval evaluates constant expressions of literals, named constants, * and +.
func (p *Program) eval(expr string) (int64, error) {
	expr = strings.TrimSpace(expr)
	if i := strings.LastIndexByte(expr, '+'); i >= 0 {
		a, err := p.eval(expr[:i])
		if err != nil {
			return 0, err
		}
		b, err := p.eval(expr[i+1:])
		return a + b, err
	}
	if i := strings.LastIndexByte(expr, '*'); i >= 0 {
		a, err := p.eval(expr[:i])
		if err != nil {
			return 0, err
		}
		b, err := p.eval(expr[i+1:])
		return a * b, err
	}
	if v, ok := p.Consts[expr]; ok {
		return v, nil
	}
	if i := strings.IndexByte(expr, 'w'); i > 0 && !strings.HasPrefix(expr, "0x") {
		expr = expr[i+1:] // width-prefixed literal such as 16w7733
	}
	v, err := strconv.ParseInt(expr, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("cannot evaluate %q", expr)
	}
	return v, nil
}
