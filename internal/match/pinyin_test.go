package match

import (
	"testing"

	"golang.org/x/text/encoding/simplifiedchinese"
)

// TestGB2312Set: the table made in fixed buffers says of every CJK
// unified ideograph what the encoder's String says, and holds GB2312's
// 6,763 characters.
func TestGB2312Set(t *testing.T) {
	set := gb2312Set()
	enc := simplifiedchinese.HZGB2312.NewEncoder()
	n := 0
	for r := rune(firstHan); r <= lastHan; r++ {
		_, err := enc.String(string(r))
		enc.Reset()
		if in := err == nil; set[r-firstHan] != in {
			t.Errorf("%c (U+%04X): in the set %v, encodes %v (%v)", r, r, set[r-firstHan], in, err)
		}
		if set[r-firstHan] {
			n++
		}
	}
	if n != 6763 {
		t.Errorf("%d characters in the set, want GB2312's 6763", n)
	}
	for _, r := range []rune{'读', '取', '提', '交'} {
		if traditional(r) {
			t.Errorf("traditional(%c) = true, want false: it is in GB2312", r)
		}
	}
	for _, r := range []rune{'讀', '寫', '執', '內'} {
		if !traditional(r) {
			t.Errorf("traditional(%c) = false, want true: it is not in GB2312", r)
		}
	}
}

func BenchmarkGB2312Set(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		gb2312Set()
	}
}
