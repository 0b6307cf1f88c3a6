package runs

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends e as JSON, exactly as json.Marshal writes it. Output
// events, a stream's bulk, take a fast path: the chunk is escaped in one
// pass into room made for it, with no reflection and no copy of its own.
func (e *Event) AppendJSON(b []byte) []byte {
	if (e.Event != EventStdout && e.Event != EventStderr) || e.Result != nil || e.Dropped != 0 || e.DroppedBytes != 0 ||
		e.Progress != 0 || e.Total != 0 || e.Message != "" {
		j, err := json.Marshal(e)
		if err != nil { // an Event always marshals; keep the line valid anyway
			j = []byte(`{"seq":` + strconv.FormatInt(e.Seq, 10) + `,"event":"error"}`)
		}
		return append(b, j...)
	}
	b = strconv.AppendInt(append(b, `{"seq":`...), e.Seq, 10)
	b = appendJSONString(append(b, `,"event":`...), e.Event)
	if e.Data != "" {
		b = appendJSONString(append(b, `,"data":`...), e.Data)
	}
	if e.Encoding != "" {
		b = appendJSONString(append(b, `,"encoding":`...), e.Encoding)
	}
	return append(b, '}')
}

// jsonEscape[c] is 0 for a byte written as it is, 1 for the first byte
// of a multi-byte sequence (or an invalid one), else the letter after
// the backslash ('u': \u00XX). As json.Marshal: <, > and & are escaped
// for HTML.
var jsonEscape = func() (t [256]byte) {
	for c := range 0x20 {
		t[c] = 'u'
	}
	t['\n'], t['\r'], t['\t'], t['\b'], t['\f'] = 'n', 'r', 't', 'b', 'f'
	t['"'], t['\\'] = '"', '\\'
	t['<'], t['>'], t['&'] = 'u', 'u', 'u'
	for c := utf8.RuneSelf; c < 0x100; c++ {
		t[c] = 1
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaped as json.Marshal
// does (invalid UTF-8 becomes U+FFFD, U+2028 and U+2029 are escaped).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for len(s) > 0 {
		// A block at a time, with room for its worst case (\u00XX per
		// byte, a rune started in it may end past it), so the loop
		// writes by index.
		n := min(len(s), jsonBlock)
		b = slices.Grow(b, 6*n+utf8.UTFMax*6)
		j, d := len(b), b[:cap(b)]
		i := 0
		for i < n {
			c := s[i]
			switch e := jsonEscape[c]; e {
			case 0:
				d[j] = c
				j++
				i++
			case 1:
				r, size := utf8.DecodeRuneInString(s[i:])
				switch {
				case r == utf8.RuneError && size == 1:
					j += copy(d[j:], `\ufffd`)
				case r == '\u2028' || r == '\u2029':
					j += copy(d[j:], `\u202`)
					d[j] = hexDigits[r&0xf]
					j++
				default:
					j += copy(d[j:], s[i:i+size])
				}
				i += size
			default:
				d[j], d[j+1] = '\\', e
				j += 2
				if e == 'u' {
					d[j], d[j+1], d[j+2], d[j+3] = '0', '0', hexDigits[c>>4], hexDigits[c&0xf]
					j += 4
				}
				i++
			}
		}
		b, s = d[:j], s[i:]
	}
	return append(b, '"')
}

// jsonBlock is how many bytes appendJSONString escapes per block.
const jsonBlock = 4 << 10
