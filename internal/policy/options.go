package policy

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// This file models how programs parse their options, so that an option is
// judged the way the program itself reads it: clustered short options
// (-abc), values attached or separate (-k2, -k 2, --key=2, --key 2),
// optional values (-i[SUF], --in-place[=SUF]), GNU getopt_long's unique
// prefixes (--in-pl means --in-place), "--" ending the options, and
// options after operands (GNU permutes them) or not (wrappers, awk, git).

// valueKind says whether an option takes a value.
type valueKind uint8

const (
	noValue   valueKind = iota // -v, --verbose
	needValue                  // -k 2, -k2, --key 2, --key=2
	optValue                   // -i, -iSUF, --in-place, --in-place=SUF (attached only)
)

// option is one option a program knows. class is what giving it does:
// "" when it only changes how the program reads or prints.
type option struct {
	name  string // "k" for -k, "key" for --key (without dashes)
	value valueKind
	class Class
}

// optSpec is the option grammar of one program.
type optSpec struct {
	words *optWords // its options, parsed at first use
	// inOrder: options end at the first operand (wrappers, awk, git's
	// global options: getopt with a leading "+"); otherwise GNU getopt
	// permutes and options may follow operands.
	inOrder bool
	// numeric: digits are flags (-5 for nice, head, gzip -9).
	numeric bool
	// plus: +x is an option cluster too (sh, bash: +o, +x).
	plus bool
	// open: an option the spec does not list is taken as a harmless flag;
	// only for programs whose spec lists just the dangerous options.
	open bool
	// dashLong: long options may be written with one dash too (xxd -cols).
	dashLong bool
}

// opts builds a spec from a compact list of space-separated words:
//
//	-x       a flag            --name      a flag
//	-x:      takes a value     --name=     takes a value
//	-x::     optional value    --name=?    optional value
//
// A suffix !class says what the option does, e.g. "-o:!write",
// "--compress-program=!exec". A malformed word panics when the spec is
// first used (specs are constants; TestSpecsParse uses every one).
func opts(list string) *optSpec {
	w := &optWords{list: list}
	specsMu.Lock()
	specs = append(specs, w)
	specsMu.Unlock()
	return &optSpec{words: w}
}

// optWords are the options of a spec's list, parsed at their first use:
// parsing the 54 specs at init took 2-3 ms and 370 KB of every toolagent
// process (the sandbox's reaper and each command line too), most of which
// never judge a command. TestSpecsParse parses every one.
type optWords struct {
	once  sync.Once
	list  string
	short map[byte]option
	long  map[string]option
}

// specs are the words of every spec made (TestSpecsParse).
var (
	specsMu sync.Mutex
	specs   []*optWords
)

// options returns s's options, parsing them the first time.
func (s *optSpec) options() *optWords {
	s.words.once.Do(s.words.parse)
	return s.words
}

// parse reads list into short and long; a malformed word panics.
func (s *optWords) parse() {
	s.short, s.long = map[byte]option{}, map[string]option{}
	for _, w := range strings.Fields(s.list) {
		w, class, _ := strings.Cut(w, "!")
		o := option{class: Class(class)}
		switch {
		case strings.HasPrefix(w, "--"):
			o.name = strings.TrimPrefix(w, "--")
			switch {
			case strings.HasSuffix(o.name, "=?"):
				o.name, o.value = strings.TrimSuffix(o.name, "=?"), optValue
			case strings.HasSuffix(o.name, "="):
				o.name, o.value = strings.TrimSuffix(o.name, "="), needValue
			}
			s.long[o.name] = o
		case strings.HasPrefix(w, "-") && len(w) >= 2:
			o.name = w[1:2]
			switch w[2:] {
			case "":
			case ":":
				o.value = needValue
			case "::":
				o.value = optValue
			default:
				panic("policy: bad option spec " + w)
			}
			s.short[w[1]] = o
		default:
			panic("policy: bad option spec " + w)
		}
		if o.class != "" && classReason[o.class] == "" {
			panic("policy: bad class in option spec " + w)
		}
	}
}

// with returns a copy of s with the flags of mode set: "inOrder",
// "numeric", "plus", "open", "dashLong" (comma-separated).
func (s *optSpec) with(mode string) *optSpec {
	t := *s
	for _, m := range strings.Split(mode, ",") {
		switch m {
		case "inOrder":
			t.inOrder = true
		case "numeric":
			t.numeric = true
		case "plus":
			t.plus = true
		case "open":
			t.open = true
		case "dashLong":
			t.dashLong = true
		default:
			panic("policy: bad option mode " + m)
		}
	}
	return &t
}

// resolveLong finds the long option a given name (without dashes or
// "=value") stands for: the exact name, else the options it is a prefix
// of, as getopt_long accepts any unambiguous prefix. Of several, the
// strictest counts (a dangerous one first), so an abbreviation that could
// mean a dangerous option is judged as that option.
func (s *optSpec) resolveLong(name string) (option, bool) {
	long := s.options().long
	if o, ok := long[name]; ok {
		return o, true
	}
	if name == "" {
		return option{}, false
	}
	var cands []option
	for n, o := range long {
		if strings.HasPrefix(n, name) {
			cands = append(cands, o)
		}
	}
	if len(cands) == 0 {
		return option{}, false
	}
	sort.Slice(cands, func(i, k int) bool {
		if (cands[i].class != "") != (cands[k].class != "") {
			return cands[i].class != ""
		}
		return cands[i].name < cands[k].name
	})
	return cands[0], true
}

// given is an option found on a command line.
type given struct {
	opt     option
	spelled string // how it is written, e.g. "--out" or "-o"
	value   *arg   // its value, nil when none
}

// parsedArgs is a command line split by an optSpec.
type parsedArgs struct {
	opts     []given
	operands []arg
}

// has reports whether one of the options named (canonical names: "o",
// "output") was given.
func (p parsedArgs) has(names ...string) bool {
	for _, g := range p.opts {
		for _, n := range names {
			if g.opt.name == n {
				return true
			}
		}
	}
	return false
}

// values returns the values given to the options named.
func (p parsedArgs) values(names ...string) []arg {
	var out []arg
	for _, g := range p.opts {
		for _, n := range names {
			if g.opt.name == n && g.value != nil {
				out = append(out, *g.value)
			}
		}
	}
	return out
}

// optionLike reports whether a word in an option position is, or may
// become after expansion, an option: a static word starting with '-' (or
// '+' when plus), a pattern starting so, or a word with an expansion that
// does not start with a literal other than '-' (so "$x", ${x}, -ex${u}ec
// and an unquoted $x that may split into several words).
func optionLike(a arg, plus bool) bool {
	dash := func(s string) bool {
		return len(s) > 1 && (s[0] == '-' || plus && s[0] == '+')
	}
	if a.static {
		return dash(a.s)
	}
	return a.split || a.lead == "" || dash(a.lead) || a.lead == "-" || plus && a.lead == "+"
}

// parse splits c's args by s. Every option is judged on the way: one
// given by an expansion is dynamic, one s does not know is unknown (unless
// s is open), and one whose class is set records that class. An unquoted
// expansion before the end of the options is dynamic too: it may split
// into several words, options among them.
func (c *call) parse(s *optSpec) parsedArgs {
	return c.parseArgs(s, c.args)
}

func (c *call) parseArgs(s *optSpec, args []arg) parsedArgs {
	var p parsedArgs
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a.static && a.s == "--" {
			p.operands = append(p.operands, args[i+1:]...)
			break
		}
		if !optionLike(a, s.plus) {
			if s.inOrder {
				p.operands = append(p.operands, args[i:]...)
				break
			}
			p.operands = append(p.operands, a)
			continue
		}
		if !a.static {
			c.add(ClassDynamic, fmt.Sprintf("has an option not known until the command runs (`%s`)", short(a.s)))
			if s.inOrder {
				p.operands = append(p.operands, args[i:]...)
				break
			}
			continue
		}
		next := func() *arg { // the next word, as an option's value
			if i+1 >= len(args) {
				return nil
			}
			i++
			v := args[i]
			if v.split {
				c.add(ClassDynamic, fmt.Sprintf("has an option value that may split into several words (`%s`)", short(v.s)))
			}
			return &v
		}
		long := strings.HasPrefix(a.s, "--")
		if s.dashLong && !long && len(a.s) > 2 && a.s[0] == '-' {
			name, _, _ := strings.Cut(a.s[1:], "=")
			_, long = s.resolveLong(name)
			if long {
				a.s = "-" + a.s
			}
		}
		if long {
			name, val, eq := strings.Cut(a.s[2:], "=")
			o, ok := s.resolveLong(name)
			if !ok {
				if !s.open {
					c.add(ClassUnknown, fmt.Sprintf("has the option `--%s`, which the policy does not know", short(name)))
				}
				continue
			}
			g := given{opt: o, spelled: "--" + name}
			switch {
			case eq:
				g.value = &arg{s: val, static: true, lead: val}
			case o.value == needValue:
				g.value = next()
			}
			c.option(g)
			p.opts = append(p.opts, g)
			continue
		}
		// A cluster of short options: -abc, -k2, -k 2.
		for k := 1; k < len(a.s); k++ {
			ch := a.s[k]
			o, ok := s.options().short[ch]
			if !ok && s.numeric && ch >= '0' && ch <= '9' {
				o, ok = option{name: string(ch)}, true
			}
			if !ok {
				if !s.open {
					c.add(ClassUnknown, fmt.Sprintf("has the option `%c%c`, which the policy does not know", a.s[0], ch))
				}
				break
			}
			g := given{opt: o, spelled: string(a.s[0]) + string(ch)}
			rest := a.s[k+1:]
			switch {
			case o.value == needValue && rest != "":
				g.value = &arg{s: rest, static: true, lead: rest}
			case o.value == needValue:
				g.value = next()
			case o.value == optValue && rest != "":
				g.value = &arg{s: rest, static: true, lead: rest}
			}
			c.option(g)
			p.opts = append(p.opts, g)
			if o.value != noValue {
				break
			}
		}
	}
	return p
}

// optPhrase says what an option of each class does, for verdicts.
var optPhrase = map[Class]string{
	ClassWrite:       "writes to a file",
	ClassDelete:      "deletes files",
	ClassExec:        "runs a command or program the policy cannot see",
	ClassSystem:      "changes the state of the system",
	ClassProcess:     "signals or controls other processes",
	ClassNetwork:     "reaches the network",
	ClassEnvironment: "changes how later commands are found or run",
	ClassDynamic:     "runs a command not known until the command runs",
	ClassPrivilege:   "raises privileges",
}

// option records the class of a given option, if it has one.
func (c *call) option(g given) {
	if g.opt.class == "" {
		return
	}
	name := g.opt.name
	if len(name) > 1 {
		name = "--" + name
	} else {
		name = g.spelled
	}
	c.addAs(c.name+" "+name, g.opt.class, fmt.Sprintf("has the option `%s`, which %s", short(g.spelled), optPhrase[g.opt.class]))
}

// specRead is a read-only program whose options are judged by s.
func specRead(s *optSpec) classifier {
	return func(c *call) { c.parse(s) }
}
