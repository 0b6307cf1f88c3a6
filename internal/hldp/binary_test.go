package hldp

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

// roundTrip encodes t, decodes the bytes, then overwrites them: the
// decoded Tool must equal t and keep nothing of the bytes it came from.
func roundTrip(t *testing.T, tool *Tool) *Tool {
	t.Helper()
	data, err := tool.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary(%s) = %v", tool.Name, err)
	}
	var got Tool
	if err := got.UnmarshalBinary(data); err != nil {
		t.Fatalf("UnmarshalBinary(%s) = %v", tool.Name, err)
	}
	for i := range data {
		data[i] = '#'
	}
	opts := cmp.Options{cmp.AllowUnexported(Tool{}), cmp.Comparer(func(a, b *lazy) bool { return a == b })}
	if diff := cmp.Diff(tool, &got, opts); diff != "" {
		t.Fatalf("%s after a round trip through its binary form (-want +got):\n%s", tool.Name, diff)
	}
	return &got
}

// TestBinaryRoundTrip: every good definition comes back from its binary
// form as Parse returned it, marked for its memo like Parse's.
func TestBinaryRoundTrip(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "good", "*", FileName))
	if err != nil || len(files) == 0 {
		t.Fatalf("no good definitions: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tool, err := Parse(f, data)
		if err != nil {
			t.Fatal(err)
		}
		if got := roundTrip(t, tool); got.lazy != pending {
			t.Errorf("%s: a decoded tool is not marked for its memo", f)
		}
	}
}

// TestBinaryEveryField: a Tool with every exported field set, to the
// depth of a param's items, survives the round trip: a field added to
// Tool, Param or what they hold that MarshalBinary forgets fails here.
func TestBinaryEveryField(t *testing.T) {
	tool := filled(t)
	tool.lazy = pending // as a decoded one is
	roundTrip(t, tool)
}

// filled is a Tool with every field set (see fill), its argv one word
// and one group, as Parse makes them.
func filled(t testing.TB) *Tool {
	var tool Tool
	fill(t, reflect.ValueOf(&tool).Elem(), 0)
	tool.Argv[0].Group, tool.Argv[1].Word = nil, ""
	return &tool
}

// fill sets every exported field below v to a value that is not zero.
func fill(t testing.TB, v reflect.Value, depth int) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + v.Type().Name())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(2.5)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), depth)
			}
		}
	case reflect.Pointer:
		if v.Type() == reflect.TypeFor[*Param]() {
			if depth > 0 {
				return // Param.Items of Param.Items
			}
			depth++
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), depth)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range v.Len() {
			fill(t, v.Index(i), depth)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		e := reflect.New(v.Type().Elem()).Elem()
		fill(t, e, depth)
		v.SetMapIndex(reflect.ValueOf("k"), e)
	case reflect.Interface: // a param value: each kind Parse gives
		v.Set(reflect.ValueOf([]any{"a", int64(-3), 1.5, true, nil, []any{}, map[string]any{"m": []any{"x"}}}))
	default:
		t.Fatalf("fill: a field of kind %s (%s): teach fill and MarshalBinary", v.Kind(), v.Type())
	}
}

// TestBinaryDecodedShares: a decoded tool interns what tools share and
// packs what it alone holds, its file's path too, as Parse does.
func TestBinaryDecodedShares(t *testing.T) {
	src := []byte(`name: a
display: A
intent: show the uptime of one host
method: run
executor: shell
argv: [uptime, "{host}"]
params_schema:
  host: { type: string, required: true, description: "target host" }
keywords: [uptime]
author: ops-team
created: 2026-01-01
why: for tests
`)
	parsed, err := Parse("a/TOOL.hdlp", src)
	if err != nil {
		t.Fatal(err)
	}
	got := roundTrip(t, parsed)
	for what, pair := range map[string][2]string{
		"author": {parsed.Author, got.Author}, "method": {parsed.Method, got.Method},
		"param description": {parsed.Params[0].Description, got.Params[0].Description},
	} {
		if unsafe.StringData(pair[0]) != unsafe.StringData(pair[1]) {
			t.Errorf("%s: the decoded tool has a copy of its own, want the one copy", what)
		}
	}
	own := []string{got.Name, got.Display, got.Intent, got.Why, got.Argv[0].Word, got.Argv[1].Word, got.Keywords[0], got.File}
	for i := 1; i < len(own); i++ {
		end := unsafe.Add(unsafe.Pointer(unsafe.StringData(own[i-1])), len(own[i-1]))
		if unsafe.Pointer(unsafe.StringData(own[i])) != end {
			t.Errorf("%q does not follow %q in one string", own[i], own[i-1])
		}
	}
}

// TestBinaryBadForm: bytes cut short anywhere, another version, bytes
// past the end or a length beyond the data give an error, never a panic
// or a huge allocation.
func TestBinaryBadForm(t *testing.T) {
	data, err := filled(t).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(data) {
		var x Tool
		if err := x.UnmarshalBinary(data[:n]); err == nil {
			t.Fatalf("UnmarshalBinary of the first %d of %d bytes = nil, want an error", n, len(data))
		}
	}
	bad := map[string][]byte{
		"another version":          append([]byte{binaryVersion + 1}, data[1:]...),
		"bytes past the end":       append(bytes.Clone(data), 0),
		"a length beyond the data": {binaryVersion, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"a list beyond the data":   append([]byte{binaryVersion, 0, 0, 0, 0, 0}, 0xff, 0xff, 0xff, 0xff, 0x0f),
	}
	for what, b := range bad {
		var x Tool
		if err := x.UnmarshalBinary(b); err == nil || !strings.HasPrefix(err.Error(), "hldp: ") {
			t.Errorf("UnmarshalBinary(%s) = %v, want an error", what, err)
		}
	}
	odd := Tool{Params: []Param{{Name: "p", Ext: &ParamExt{Default: int32(1)}}}}
	if _, err := odd.MarshalBinary(); err == nil || !strings.Contains(err.Error(), "int32") {
		t.Errorf("MarshalBinary(a default of type int32) = %v, want an error naming the type", err)
	}
}

// FuzzUnmarshalBinary: any bytes decode to a Tool or an error; a Tool
// decoded encodes to the same bytes.
func FuzzUnmarshalBinary(f *testing.F) {
	if data, err := filled(f).MarshalBinary(); err == nil {
		f.Add(data)
	}
	f.Add([]byte{binaryVersion})
	f.Fuzz(func(t *testing.T, data []byte) {
		var x Tool
		if x.UnmarshalBinary(data) != nil {
			return
		}
		again, err := x.MarshalBinary()
		if err != nil {
			t.Fatalf("MarshalBinary of a decoded tool = %v", err)
		}
		var y Tool
		if err := y.UnmarshalBinary(again); err != nil {
			t.Fatalf("UnmarshalBinary(MarshalBinary(x)) = %v", err)
		}
	})
}
