package runs

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// wantJSON is s as json.Marshal writes it: the contract appendJSONString
// keeps.
func wantJSON(t testing.TB, s string) string {
	t.Helper()
	j, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(j)
}

func checkJSONString(t *testing.T, s string) {
	t.Helper()
	if got, want := string(appendJSONString([]byte("x"), s)), "x"+wantJSON(t, s); got != want {
		t.Fatalf("appendJSONString(%q)\n= %q\nwant %q", s, got, want)
	}
}

// TestAppendJSONStringEdges: every byte and rune that is escaped, at every
// place in an 8-byte word (where a word-at-a-time scan would look) and
// around the end of appendJSONString's block, is escaped as json.Marshal
// does.
func TestAppendJSONStringEdges(t *testing.T) {
	specials := []string{"\x00", "\x01", "\x08", "\t", "\n", "\x0c", "\r", "\x1f", "\x7f", "\x20", "\"", "\\", "<", ">", "&",
		"'", "%", ";", "=", "?", "[", "]", "\u2028", "\u2029", "\u2027", "\u202a", "é", "日", "😀", "\xff", "\xc3", "\xe2\x80",
		"\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\x80", "\uFFFD"}
	for c := range 256 { // every byte alone, and in a word of safe bytes
		specials = append(specials, string([]byte{byte(c)}))
	}
	for _, sp := range specials {
		checkJSONString(t, sp)
		for pre := range 17 {
			for _, post := range []int{0, 1, 7, 8, 9} {
				checkJSONString(t, strings.Repeat("a", pre)+sp+strings.Repeat("b", post))
			}
		}
		for _, pre := range []int{jsonBlock - 9, jsonBlock - 3, jsonBlock - 2, jsonBlock - 1, jsonBlock, jsonBlock + 1, 2*jsonBlock - 1} {
			checkJSONString(t, strings.Repeat("a", pre)+sp+strings.Repeat(sp, 9)+"z")
		}
	}
}

// TestAppendJSONStringRandom: random text of every kind a tool writes —
// seq's numbers, ASCII with the bytes JSON and HTML escape, UTF-8, and
// binary — is escaped as json.Marshal does.
func TestAppendJSONStringRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	alphabets := []string{"0123456789\n", "abc \"\\<>&\t\r\n\x00\x1f\x7f", "aé日😀\u2028\u2029\xff\xc3", ""}
	for range 3000 {
		a := alphabets[rng.IntN(len(alphabets))]
		b := make([]byte, rng.IntN(3*jsonBlock))
		for i := range b {
			if a == "" {
				b[i] = byte(rng.Uint32())
			} else {
				b[i] = a[rng.IntN(len(a))]
			}
		}
		checkJSONString(t, string(b))
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "1\n2\n", "a<b>&c\"d\\e\x00\x7f", "é\u2028\u2029\xff\xc3", strings.Repeat("ab\n", 3000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkJSONString(t, s) })
}

// benchTexts are chunks as a pipe gives them: seq's output, log-like
// text that needs many escapes, UTF-8 prose and binary.
func benchTexts() map[string]string {
	var seq strings.Builder
	for i := 1000000; seq.Len() < 64<<10; i++ {
		fmt.Fprintf(&seq, "%d\n", i)
	}
	log := strings.Repeat(`{"level":"info","msg":"<a href=\"x\">&amp;</a>","path":"C:\\tmp"}`+"\t\r\n", 1000)[:64<<10]
	utf := strings.Repeat("日本語のテキスト、ünïcödé and ASCII words.\n", 1500)[:64<<10]
	rng := rand.New(rand.NewPCG(1, 2))
	bin := make([]byte, 64<<10)
	for i := range bin {
		bin[i] = byte(rng.Uint32())
	}
	return map[string]string{"seq": seq.String(), "log": log, "utf8": utf, "binary": string(bin)}
}

// BenchmarkAppendJSONString: escaping one 64 KiB chunk of each kind into
// a reused buffer.
func BenchmarkAppendJSONString(b *testing.B) {
	for _, name := range []string{"seq", "log", "utf8", "binary"} {
		s := benchTexts()[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				buf = appendJSONString(buf[:0], s)
			}
		})
	}
}
