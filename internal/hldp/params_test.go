package hldp

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// paramsTool declares one param of each kind CheckParams has to handle.
const paramsTool = `name: p
display: P
intent: exercise params
method: exec
executor: shell
params_schema:
  path: { type: string, required: true, pattern: "^/" }
  max_count: { type: integer, minimum: 1, maximum: 100, default: 10 }
  ratio: { type: number, minimum: 0, maximum: 1 }
  mode: { type: string, enum: [fast, safe], default: safe }
  force: { type: boolean }
  tags: { type: array, items: { type: integer, minimum: 0 } }
  labels: { type: array }
  extra: { type: object }
author: a
created: 2026-05-31
why: tests
`

// errStrings lists the messages of a joined error in order.
func errStrings(err error) []string {
	if err == nil {
		return nil
	}
	var out []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}

func TestCheckParams(t *testing.T) {
	tool := mustParse(t, "p.hdlp", paramsTool)
	tests := []struct {
		name    string
		in      map[string]any
		want    map[string]any
		wantErr []string
	}{
		{
			name: "defaults filled",
			in:   map[string]any{"path": "/tmp"},
			want: map[string]any{"path": "/tmp", "max_count": int64(10), "mode": "safe"},
		},
		{
			name:    "nil map: required missing",
			in:      nil,
			wantErr: []string{"param path: missing required parameter; want string matching \"^/\""},
		},
		{
			name: "json.Number normalised",
			in:   map[string]any{"path": "/", "max_count": json.Number("5"), "ratio": json.Number("1"), "tags": []any{json.Number("3"), json.Number("4.0")}, "extra": map[string]any{"n": json.Number("7"), "f": json.Number("0.5")}},
			want: map[string]any{"path": "/", "max_count": int64(5), "ratio": 1.0, "mode": "safe", "tags": []any{int64(3), int64(4)}, "extra": map[string]any{"n": int64(7), "f": 0.5}},
		},
		{
			name: "float64 from encoding/json",
			in:   map[string]any{"path": "/", "max_count": 7.0, "ratio": 0.25, "force": true},
			want: map[string]any{"path": "/", "max_count": int64(7), "ratio": 0.25, "mode": "safe", "force": true},
		},
		{
			name: "plain Go values",
			in:   map[string]any{"path": "/", "max_count": 3, "labels": []string{"a", "b"}, "tags": []int{1}, "extra": map[string]string{"k": "v"}},
			want: map[string]any{"path": "/", "max_count": int64(3), "mode": "safe", "labels": []any{"a", "b"}, "tags": []any{int64(1)}, "extra": map[string]any{"k": "v"}},
		},
		{
			name: "nil value counts as absent",
			in:   map[string]any{"path": "/", "mode": nil},
			want: map[string]any{"path": "/", "max_count": int64(10), "mode": "safe"},
		},
		{
			name:    "wrong type",
			in:      map[string]any{"path": "/", "max_count": "abc"},
			wantErr: []string{`param max_count: want integer >= 1 and <= 100, got "abc"`},
		},
		{
			name:    "not an integer",
			in:      map[string]any{"path": "/", "max_count": 2.5},
			wantErr: []string{`param max_count: want integer >= 1 and <= 100, got 2.5`},
		},
		{
			name:    "enum",
			in:      map[string]any{"path": "/", "mode": "slow"},
			wantErr: []string{`param mode: want one of "fast", "safe", got "slow"`},
		},
		{
			name:    "pattern",
			in:      map[string]any{"path": "etc/passwd"},
			wantErr: []string{`param path: want string matching "^/", got "etc/passwd"`},
		},
		{
			name:    "minimum and maximum",
			in:      map[string]any{"path": "/", "max_count": 0, "ratio": 1.5},
			wantErr: []string{`param max_count: want integer >= 1 and <= 100, got 0`, `param ratio: want number >= 0 and <= 1, got 1.5`},
		},
		{
			name:    "array item",
			in:      map[string]any{"path": "/", "tags": []any{1, -2, "x"}},
			wantErr: []string{`param tags[1]: want integer >= 0, got -2`, `param tags[2]: want integer >= 0, got "x"`},
		},
		{
			name:    "unknown param",
			in:      map[string]any{"path": "/", "max_cuont": 3},
			wantErr: []string{`param max_cuont: unknown parameter; want one of path, max_count, ratio, mode, force, tags, labels, extra (did you mean "max_count"?)`},
		},
		{
			name:    "integer out of int64 range",
			in:      map[string]any{"path": "/", "max_count": json.Number("1e300")},
			wantErr: []string{`param max_count: want integer >= 1 and <= 100, got 1e+300`},
		},
		{
			name:    "value that is not JSON",
			in:      map[string]any{"path": "/", "extra": map[string]any{"c": make(chan int)}},
			wantErr: []string{`param extra: want object, got a chan int that does not convert to JSON`},
		},
		{
			name: "every problem at once",
			in:   map[string]any{"max_count": "many", "mode": "slow", "force": "yes", "bogus": 1, "tags": "1,2"},
			wantErr: []string{
				`param path: missing required parameter; want string matching "^/"`,
				`param max_count: want integer >= 1 and <= 100, got "many"`,
				`param mode: want one of "fast", "safe", got "slow"`,
				`param force: want boolean, got "yes"`,
				`param tags: want array of integer >= 0, got "1,2"`,
				`param bogus: unknown parameter; want one of path, max_count, ratio, mode, force, tags, labels, extra`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tool.CheckParams(tt.in)
			if diff := cmp.Diff(tt.wantErr, errStrings(err)); diff != "" {
				t.Errorf("CheckParams(%v) errors mismatch (-want +got):\n%s", tt.in, diff)
			}
			if err != nil {
				var pe *ParamError
				if !errors.As(err, &pe) {
					t.Errorf("CheckParams error %v holds no *ParamError", err)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CheckParams(%v) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// TestCheckParamsDoesNotAlias checks that the input and the tool's
// defaults are never shared with the result.
func TestCheckParamsDoesNotAlias(t *testing.T) {
	tool := mustParse(t, "t.hdlp", strings.Replace(seedYAML, "params_schema: {}", "params_schema: {l: {type: array, default: [a]}}", 1))
	in := map[string]any{}
	out, err := tool.CheckParams(in)
	if err != nil {
		t.Fatal(err)
	}
	out["l"].([]any)[0] = "changed"
	if len(in) != 0 {
		t.Errorf("CheckParams modified its input: %v", in)
	}
	if got := tool.Params[0].Default().([]any)[0]; got != "a" {
		t.Errorf("Default after changing a result = %v, want a", got)
	}
}

func TestCheckParamsConcurrent(t *testing.T) {
	tool := mustParse(t, "p.hdlp", paramsTool)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if _, err := tool.CheckParams(map[string]any{"path": "/x", "max_count": 2}); err != nil {
					t.Errorf("CheckParams = %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestParamErrorMessage(t *testing.T) {
	tests := []struct {
		e    ParamError
		want string
	}{
		{ParamError{Param: "max_count", Want: "integer >= 1", Got: `"abc"`}, `param max_count: want integer >= 1, got "abc"`},
		{ParamError{Param: "cmd", Problem: "missing required parameter", Want: "string"}, `param cmd: missing required parameter; want string`},
		{ParamError{Param: "cmnd", Problem: "unknown parameter", Want: "one of cmd", Hint: `did you mean "cmd"?`}, `param cmnd: unknown parameter; want one of cmd (did you mean "cmd"?)`},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}
