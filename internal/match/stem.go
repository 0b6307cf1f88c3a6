package match

// stem reduces a lower-case ASCII English word to its Porter stem
// (M. F. Porter, "An algorithm for suffix stripping", 1980). Words of one or
// two letters and words holding non-letters are returned unchanged.
func stem(w string) string {
	if len(w) <= 2 {
		return w
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return w
		}
	}
	s := porter{b: []byte(w)}
	s.step1ab()
	s.step1c()
	s.step2()
	s.step3()
	s.step4()
	s.step5()
	return string(s.b)
}

// porter holds the word being stemmed; j marks the end of the stem while a
// suffix is examined, as in the reference implementation.
type porter struct {
	b []byte
	j int
}

// cons reports whether b[i] is a consonant.
func (p *porter) cons(i int) bool {
	switch p.b[i] {
	case 'a', 'e', 'i', 'o', 'u':
		return false
	case 'y':
		if i == 0 {
			return true
		}
		return !p.cons(i - 1)
	}
	return true
}

// m counts the VC sequences in b[0:j+1].
func (p *porter) m() int {
	n, i := 0, 0
	for {
		if i > p.j {
			return n
		}
		if !p.cons(i) {
			break
		}
		i++
	}
	i++
	for {
		for {
			if i > p.j {
				return n
			}
			if p.cons(i) {
				break
			}
			i++
		}
		i++
		n++
		for {
			if i > p.j {
				return n
			}
			if !p.cons(i) {
				break
			}
			i++
		}
		i++
	}
}

// vowelInStem reports whether b[0:j+1] holds a vowel.
func (p *porter) vowelInStem() bool {
	for i := 0; i <= p.j; i++ {
		if !p.cons(i) {
			return true
		}
	}
	return false
}

// doublec reports whether b[i-1:i+1] is a double consonant.
func (p *porter) doublec(i int) bool {
	if i < 1 || p.b[i] != p.b[i-1] {
		return false
	}
	return p.cons(i)
}

// cvc reports whether b[i-2:i+1] is consonant-vowel-consonant and the last
// consonant is not w, x or y.
func (p *porter) cvc(i int) bool {
	if i < 2 || !p.cons(i) || p.cons(i-1) || !p.cons(i-2) {
		return false
	}
	switch p.b[i] {
	case 'w', 'x', 'y':
		return false
	}
	return true
}

// ends reports whether the word ends with s, and if so sets j before it.
func (p *porter) ends(s string) bool {
	k := len(p.b)
	if len(s) > k || string(p.b[k-len(s):]) != s {
		return false
	}
	p.j = k - len(s) - 1
	return true
}

// setto replaces the suffix after j with s.
func (p *porter) setto(s string) {
	p.b = append(p.b[:p.j+1], s...)
}

// r replaces the suffix with s when the stem has m() > 0.
func (p *porter) r(s string) {
	if p.m() > 0 {
		p.setto(s)
	}
}

func (p *porter) step1ab() {
	if p.b[len(p.b)-1] == 's' {
		switch {
		case p.ends("sses"):
			p.b = p.b[:len(p.b)-2]
		case p.ends("ies"):
			p.setto("i")
		case len(p.b) >= 2 && p.b[len(p.b)-2] != 's':
			p.b = p.b[:len(p.b)-1]
		}
	}
	if p.ends("eed") {
		if p.m() > 0 {
			p.b = p.b[:len(p.b)-1]
		}
		return
	}
	if (p.ends("ed") || p.ends("ing")) && p.vowelInStem() {
		p.b = p.b[:p.j+1]
		k := len(p.b) - 1
		switch {
		case p.ends("at"):
			p.setto("ate")
		case p.ends("bl"):
			p.setto("ble")
		case p.ends("iz"):
			p.setto("ize")
		case p.doublec(k):
			switch p.b[k] {
			case 'l', 's', 'z':
			default:
				p.b = p.b[:k]
			}
		default:
			p.j = k
			if p.m() == 1 && p.cvc(k) {
				p.setto("e")
			}
		}
	}
}

func (p *porter) step1c() {
	if p.ends("y") && p.vowelInStem() {
		p.b[len(p.b)-1] = 'i'
	}
}

var step2Rules = []struct{ suf, rep string }{
	{"ational", "ate"}, {"tional", "tion"}, {"enci", "ence"}, {"anci", "ance"},
	{"izer", "ize"}, {"bli", "ble"}, {"alli", "al"}, {"entli", "ent"},
	{"eli", "e"}, {"ousli", "ous"}, {"ization", "ize"}, {"ation", "ate"},
	{"ator", "ate"}, {"alism", "al"}, {"iveness", "ive"}, {"fulness", "ful"},
	{"ousness", "ous"}, {"aliti", "al"}, {"iviti", "ive"}, {"biliti", "ble"},
	{"logi", "log"},
}

func (p *porter) step2() {
	for _, r := range step2Rules {
		if p.ends(r.suf) {
			p.r(r.rep)
			return
		}
	}
}

var step3Rules = []struct{ suf, rep string }{
	{"icate", "ic"}, {"ative", ""}, {"alize", "al"}, {"iciti", "ic"},
	{"ical", "ic"}, {"ful", ""}, {"ness", ""},
}

func (p *porter) step3() {
	for _, r := range step3Rules {
		if p.ends(r.suf) {
			p.r(r.rep)
			return
		}
	}
}

var step4Suffixes = []string{
	"al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment",
	"ent", "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize",
}

func (p *porter) step4() {
	for _, s := range step4Suffixes {
		if !p.ends(s) {
			continue
		}
		if s == "ion" && (p.j < 0 || (p.b[p.j] != 's' && p.b[p.j] != 't')) {
			return
		}
		if p.m() > 1 {
			p.b = p.b[:p.j+1]
		}
		return
	}
}

func (p *porter) step5() {
	k := len(p.b) - 1
	p.j = k
	if p.b[k] == 'e' {
		p.j = k - 1
		a := p.m()
		if a > 1 || (a == 1 && !p.cvc(k-1)) {
			p.b = p.b[:k]
		}
	}
	k = len(p.b) - 1
	p.j = k
	if p.b[k] == 'l' && p.doublec(k) && p.m() > 1 {
		p.b = p.b[:k]
	}
}
