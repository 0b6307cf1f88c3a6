package hldp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"
)

// The binary form of a Tool (MarshalBinary) is what a persisted parse
// memo keeps (internal/cache, through encoding/gob, which uses it). gob
// decoding a Tool field by field freed about two small objects for each
// slice of structs it decoded, in the size class of a one-param Params
// slice: at 100,000 tools, 9 MiB of heap sat idle between the Params
// that were kept, held but not usable for other objects. UnmarshalBinary
// allocates what the Tool keeps, no more, and returns it as Parse does:
// interned, packed and marked for its lazy memo.
//
// Layout: binaryVersion, then the fields in declaration order. A string
// is a uvarint length and its bytes; a slice, map or pointer a uvarint
// that is 0 for nil, else its length plus one (1 for a present pointer),
// then its elements (a map's sorted by key); a bool one byte; an integer
// a varint; a float64 its 8 IEEE 754 bytes, little-endian; a value of
// enum or default a tag byte (valueNil ... valueMap) and its content.
const binaryVersion = 1

// The tags of a param value (Param.Enum, Param.Default): the types
// Parse gives values.
const (
	valueNil byte = iota
	valueString
	valueInt
	valueFloat
	valueBool
	valueList
	valueMap
)

// MarshalBinary encodes t (see binaryVersion). It fails only for a value
// of enum or default of a type Parse does not give.
func (t *Tool) MarshalBinary() ([]byte, error) {
	return t.AppendBinary(make([]byte, 0, 512))
}

// AppendBinary appends MarshalBinary's form of t to b
// (encoding.BinaryAppender): a file of many tools is encoded into one
// buffer.
func (t *Tool) AppendBinary(b []byte) ([]byte, error) {
	e := &encoder{b: b}
	e.b = append(e.b, binaryVersion)
	e.str(t.Name)
	e.str(t.Display)
	e.str(t.Intent)
	e.str(t.Method)
	e.str(string(t.Executor))
	e.count(t.Params == nil, len(t.Params))
	for i := range t.Params {
		e.param(&t.Params[i])
	}
	c := &t.Constraints
	e.int(int64(c.Timeout))
	e.int(c.MaxOutputBytes)
	e.str(c.OutputKeep)
	e.bool(c.RequireConfirm)
	e.int(int64(c.MaxConcurrency))
	e.count(c.Rules == nil, len(c.Rules))
	for _, k := range slices.Sorted(maps.Keys(c.Rules)) {
		r := c.Rules[k]
		e.str(k)
		e.strs(r.Allow)
		e.strs(r.Confirm)
		e.strs(r.Deny)
	}
	e.str(c.ShellPolicy)
	e.str(t.Author)
	e.str(t.Created)
	e.str(t.Why)
	e.count(t.Argv == nil, len(t.Argv))
	for _, a := range t.Argv {
		g := a.Group
		e.bool(g != nil)
		if g == nil {
			e.str(a.Word)
			continue
		}
		e.strs(g.Words)
		e.count(g.If == nil, 0)
		if g.If != nil {
			e.str(g.If.Param)
			e.strs(g.If.Values)
		}
	}
	e.strs(t.Keywords)
	e.count(t.Ext == nil, 0)
	if x := t.Ext; x != nil {
		e.str(x.Target)
		e.bool(x.Sandbox.None)
		e.strs(x.Sandbox.Write)
		e.bool(x.Sandbox.Network)
		e.count(x.Requires == nil, 0)
		if r := x.Requires; r != nil {
			e.strs(r.Programs)
			e.strs(r.Files)
			e.strs(r.Check)
		}
		e.strs(x.Tags)
		e.strs(x.Examples)
	}
	e.str(t.File)
	if e.err != nil {
		return nil, e.err
	}
	return e.b, nil
}

// UnmarshalBinary sets t to the Tool data encodes (MarshalBinary's form),
// interned and packed as Parse returns one (see Intern). It keeps nothing
// of data. A form it cannot read, or bytes left over, is an error.
func (t *Tool) UnmarshalBinary(data []byte) error {
	d := &decoder{b: data}
	if v := d.byte(); d.err == nil && v != binaryVersion {
		return fmt.Errorf("hldp: a binary Tool of version %d, want %d", v, binaryVersion)
	}
	var x Tool
	// Strings are read as views of data: what the Tool alone holds is
	// copied into one string by pack, the rest by in (package unique
	// clones what it keeps), as Intern chooses; nothing else may keep a
	// view (TestBinaryEveryField overwrites the data after decoding).
	x.Name, x.Display, x.Intent = d.str(), d.str(), d.str()
	x.Method, x.Executor = in(d.str()), ExecutorKind(in(d.str()))
	if n, ok := d.count(); ok {
		x.Params = make([]Param, n)
		for i := range x.Params {
			d.param(&x.Params[i])
		}
	}
	c := &x.Constraints
	c.Timeout, c.MaxOutputBytes = time.Duration(d.int()), d.int()
	c.OutputKeep, c.RequireConfirm, c.MaxConcurrency = in(d.str()), d.bool(), int(d.int())
	if n, ok := d.count(); ok {
		c.Rules = make(map[string]ArgRules, n)
		for range n {
			k := in(d.str())
			c.Rules[k] = ArgRules{Allow: d.inStrs(), Confirm: d.inStrs(), Deny: d.inStrs()}
		}
	}
	c.ShellPolicy = in(d.str())
	x.Author, x.Created, x.Why = in(d.str()), in(d.str()), d.str()
	if n, ok := d.count(); ok {
		x.Argv = make([]ArgvItem, n)
		for i := range x.Argv {
			if !d.bool() {
				x.Argv[i].Word = d.str()
				continue
			}
			g := &ArgvGroup{Words: d.inStrs()}
			if _, ok := d.count(); ok {
				g.If = &ArgvCond{Param: in(d.str()), Values: d.inStrs()}
			}
			x.Argv[i].Group = g
		}
	}
	x.Keywords = d.strs()
	if _, ok := d.count(); ok {
		e := &Ext{Target: in(d.str())}
		e.Sandbox.None, e.Sandbox.Write, e.Sandbox.Network = d.bool(), d.inStrs(), d.bool()
		if _, ok := d.count(); ok {
			e.Requires = &Requires{Programs: d.inStrs(), Files: d.inStrs(), Check: d.inStrs()}
		}
		e.Tags, e.Examples = d.inStrs(), d.strs()
		x.Ext = e
	}
	x.File = d.str()
	switch {
	case d.err != nil:
		return fmt.Errorf("hldp: a binary Tool: %w", d.err)
	case len(d.b) > 0:
		return fmt.Errorf("hldp: a binary Tool has %d bytes past its end", len(d.b))
	}
	x.pack([]*string{&x.File})
	x.lazy = pending
	*t = x
	return nil
}

type encoder struct {
	b   []byte
	err error
}

func (e *encoder) uint(n uint64) { e.b = binary.AppendUvarint(e.b, n) }
func (e *encoder) int(n int64)   { e.b = binary.AppendVarint(e.b, n) }
func (e *encoder) str(s string)  { e.uint(uint64(len(s))); e.b = append(e.b, s...) }

func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

// count writes 0 for nil, else n+1.
func (e *encoder) count(isNil bool, n int) {
	if isNil {
		e.uint(0)
	} else {
		e.uint(uint64(n) + 1)
	}
}

func (e *encoder) strs(ss []string) {
	e.count(ss == nil, len(ss))
	for _, s := range ss {
		e.str(s)
	}
}

func (e *encoder) float(f float64) {
	e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(f))
}

func (e *encoder) param(p *Param) {
	e.str(p.Name)
	e.str(string(p.Type))
	e.str(p.Description)
	e.bool(p.Required)
	e.bool(p.Secret)
	e.count(p.Ext == nil, 0)
	x := p.Ext
	if x == nil {
		return
	}
	e.count(x.Enum == nil, len(x.Enum))
	for _, v := range x.Enum {
		e.value(v)
	}
	e.value(x.Default)
	e.str(x.Pattern)
	for _, f := range []*float64{x.Min, x.Max} {
		e.count(f == nil, 0)
		if f != nil {
			e.float(*f)
		}
	}
	e.count(x.Items == nil, 0)
	if x.Items != nil {
		e.param(x.Items)
	}
}

func (e *encoder) value(v any) {
	switch v := v.(type) {
	case nil:
		e.b = append(e.b, valueNil)
	case string:
		e.b = append(e.b, valueString)
		e.str(v)
	case int64:
		e.b = append(e.b, valueInt)
		e.int(v)
	case float64:
		e.b = append(e.b, valueFloat)
		e.float(v)
	case bool:
		e.b = append(e.b, valueBool)
		e.bool(v)
	case []any:
		e.b = append(e.b, valueList)
		e.count(v == nil, len(v))
		for _, x := range v {
			e.value(x)
		}
	case map[string]any:
		e.b = append(e.b, valueMap)
		e.count(v == nil, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			e.str(k)
			e.value(v[k])
		}
	default:
		if e.err == nil {
			e.err = fmt.Errorf("hldp: cannot encode a param value of type %T", v)
		}
	}
}

var errShort = errors.New("cut short")

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail(errShort)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uint() uint64 {
	n, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[k:]
	return n
}

func (d *decoder) int() int64 {
	n, k := binary.Varint(d.b)
	if k <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[k:]
	return n
}

func (d *decoder) bool() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail(errors.New("a bool that is neither 0 nor 1"))
	return false
}

// str returns a view of the next string's bytes in the data (see
// UnmarshalBinary: the caller copies it).
func (d *decoder) str() string {
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.fail(errShort)
		return ""
	}
	if n == 0 {
		return ""
	}
	s := unsafe.String(&d.b[0], int(n))
	d.b = d.b[n:]
	return s
}

// count reads what encoder.count wrote: ok is false for nil. A length
// longer than the bytes left is refused before anything is allocated for
// it (every element takes at least one byte).
func (d *decoder) count() (n int, ok bool) {
	c := d.uint()
	if c == 0 || d.err != nil {
		return 0, false
	}
	if c-1 > uint64(len(d.b)) {
		d.fail(errShort)
		return 0, false
	}
	return int(c - 1), true
}

// strs reads a list of views (packed by the caller).
func (d *decoder) strs() []string {
	n, ok := d.count()
	if !ok {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = d.str()
	}
	return ss
}

// inStrs reads a list of strings that tools share (see Intern).
func (d *decoder) inStrs() []string {
	ss := d.strs()
	inAll(ss)
	return ss
}

func (d *decoder) float() float64 {
	if len(d.b) < 8 {
		d.fail(errShort)
		return 0
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return f
}

// param reads a Param, its strings interned (see Param.intern).
func (d *decoder) param(p *Param) {
	p.Name, p.Type, p.Description = in(d.str()), ParamType(in(d.str())), in(d.str())
	p.Required = d.bool()
	p.Secret = d.bool()
	if _, ok := d.count(); !ok {
		return
	}
	x := new(ParamExt)
	if n, ok := d.count(); ok {
		x.Enum = make([]any, n)
		for i := range x.Enum {
			x.Enum[i] = d.value(true)
		}
	}
	x.Default = d.value(false)
	x.Pattern = in(d.str())
	for _, f := range []**float64{&x.Min, &x.Max} {
		if _, ok := d.count(); ok {
			v := d.float()
			*f = &v
		}
	}
	if _, ok := d.count(); ok {
		x.Items = new(Param)
		d.param(x.Items)
	}
	p.Ext = x
}

// value reads a param value; its strings are interned when shared (an
// enum's), copied otherwise.
func (d *decoder) value(shared bool) any {
	own := func(s string) string {
		if shared {
			return in(s)
		}
		return strings.Clone(s)
	}
	switch tag := d.byte(); tag {
	case valueNil:
		return nil
	case valueString:
		return own(d.str())
	case valueInt:
		return d.int()
	case valueFloat:
		return d.float()
	case valueBool:
		return d.bool()
	case valueList:
		n, ok := d.count()
		if !ok {
			return []any(nil)
		}
		l := make([]any, n)
		for i := range l {
			l[i] = d.value(shared)
		}
		return l
	case valueMap:
		n, ok := d.count()
		if !ok {
			return map[string]any(nil)
		}
		m := make(map[string]any, n)
		for range n {
			k := own(d.str())
			m[k] = d.value(shared)
		}
		return m
	default:
		d.fail(fmt.Errorf("a param value of unknown kind %d", tag))
		return nil
	}
}
