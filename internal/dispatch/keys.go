package dispatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// CheckKeys checks the keys of the JSON document data, which decodes
// without error: no object in it, at any depth, names a key twice (which
// encoding/json would take silently, keeping the last), and with fields
// non-nil the top-level object's keys are exactly those (encoding/json
// matches names without regard to case). The error names the key and
// where it is, as a path below root ("params.o.l[]"; root "" is "the
// request"). Every door checks a call's params with it (decodeParams);
// the HTTP API checks its request bodies too.
func CheckKeys(data []byte, root string, fields map[string]bool) error {
	type frame struct {
		obj     bool
		wantKey bool
		keys    map[string]bool
		path    string
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	key := ""
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // EOF; a syntax error was reported by the decode before
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.obj && top.wantKey {
			where := top.path
			if where == "" {
				where = "the request"
			}
			if top.keys[s] {
				return fmt.Errorf("key %q appears twice in %s; each key once", s, where)
			}
			top.keys[s] = true
			if len(stack) == 1 && fields != nil && !fields[s] {
				return fmt.Errorf("unknown field %q (field names are exact: %s)", s, strings.Join(sortedKeys(fields), ", "))
			}
			top.wantKey, key = false, s
			continue
		}
		// A value: its object waits for the next key.
		if top != nil && top.obj {
			top.wantKey = true
		}
		path := root
		if top != nil {
			path = strings.TrimPrefix(top.path+"."+key, ".")
			if !top.obj {
				path = top.path + "[]"
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, wantKey: true, keys: map[string]bool{}, path: path})
		case json.Delim('['):
			stack = append(stack, &frame{path: path})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].obj {
				stack[len(stack)-1].wantKey = true
			}
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
