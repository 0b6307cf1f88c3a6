package match

// learnedPrefix starts the index key of a term of a Learned field.
const learnedPrefix = "\x00L"

// How learned requests weigh (see Field.Learned): a document's coverage
// is its own coverage c plus (1-c)*learnedGain times its learned
// coverage; a document its own text does not match is a candidate only
// from learnedAlone learned coverage on; a query that its best candidate
// covers by learnedSure through learned requests is found whatever its
// own score. Chosen on the development set and the second split taught
// one from the other (matcheval's TestLearning), where they raise served
// recall@3 and leave every no-fit recall as it was.
//
// A learned word counts fully when its field weighs 1 (a new request) and
// less as its weight falls with age: its share is its posting's saturated
// frequency over learnedFull, that of one occurrence at weight 1, capped
// at 1.
var learnedFull = float32(saturate(1))

const (
	learnedGain  = 0.55
	learnedAlone = 0.5
	learnedSure  = 0.75
)

// learnedTerm returns the id of the learned-request term of key (see
// Field.Learned), if some document holds it. The key is built in s's
// buffer: a lookup with a converted byte slice does not allocate.
func (ix *Index) learnedTerm(s *scratch, key string) (int32, bool) {
	if !ix.hasLearned {
		return 0, false
	}
	s.key = append(append(s.key[:0], learnedPrefix...), key...)
	id, ok := ix.terms[string(s.key)]
	if !ok {
		id, ok = ix.extra[string(s.key)]
	}
	return id, ok && ix.df(id) > 0
}
