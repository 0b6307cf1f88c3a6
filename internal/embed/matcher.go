package embed

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/hldp"
)

// Defaults of Options.
const (
	DefaultTimeout = 300 * time.Millisecond
	// DefaultWeight is Options.Weight's default, measured on the
	// development set (docs/matching.md, "Embeddings").
	DefaultWeight = 0.1
	// reloadTimeout bounds one batch of tool texts at reload.
	reloadTimeout = 30 * time.Second
	// batchSize is how many tool texts one reload request carries.
	batchSize = 64
	// retryEvery is how often tools left without vectors (the endpoint
	// failed at reload) are asked for again.
	retryEvery = 30 * time.Second
)

// Options configure a Matcher.
type Options struct {
	// URL is the endpoint's base URL (/v1/embeddings is appended), Model
	// the model name sent with every request, Key the bearer token (empty:
	// none). Key never reaches an error, a log or an answer.
	URL, Model, Key string
	// Timeout bounds the request's vector for one query (0: DefaultTimeout).
	Timeout time.Duration
	// CacheFile, when set, is where the tools' vectors are kept across
	// restarts (beside the parse cache in STATE).
	CacheFile string
	// Languages, when not empty, are the languages of the model: a
	// request in another ("en": mostly Latin letters, "zh": mostly Han
	// characters) is matched lexically alone.
	Languages []string
	// Weight is the weight of the embeddings' ranking in the fusion, the
	// lexical one's being 1 (0: DefaultWeight).
	Weight float64
	// HTTP is the client (nil: a new one).
	HTTP *http.Client
	// Log gets reload outcomes (nil: discarded).
	Log *slog.Logger
	// Now is the clock of the circuit breaker (nil: time.Now).
	Now func() time.Time
}

// Matcher answers intent queries with the lexical ranking fused with the
// embeddings' (Match), and keeps the tools' vectors current (Watch or
// Refresh). It is safe for concurrent use.
type Matcher struct {
	c    *Client
	opts Options
	log  *slog.Logger
	br   breaker

	mu     sync.Mutex             // guards cache, dims, dirty
	cache  map[[32]byte][]float32 // by textKey
	dims   int
	dirty  bool
	saveMu sync.Mutex

	set atomic.Pointer[toolSet]
}

// toolSet is the vectors of one snapshot's callable tools.
type toolSet struct {
	gen     uint64
	dims    int
	names   []string
	vecs    []float32      // len(names)*dims, row i is names[i]'s
	missing int            // callable tools without a vector
	index   map[string]int // row by name
	// signs holds each row's signs, words uint64 a row (prefilter.go).
	signs []uint64
	words int
}

// New returns a Matcher of the endpoint opts describe, with the vectors of
// opts.CacheFile when it holds some for opts.Model.
func New(opts Options) (*Matcher, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Weight <= 0 {
		opts.Weight = DefaultWeight
	}
	for _, l := range opts.Languages {
		if l != "en" && l != "zh" {
			return nil, fmt.Errorf("match_embeddings.languages: %q is not a language told apart; want en or zh", l)
		}
	}
	if strings.TrimSpace(opts.Model) == "" {
		return nil, errors.New("match_embeddings.model is required with match_embeddings.url: the model name the endpoint serves")
	}
	c, err := NewClient(opts.URL, opts.Model, opts.Key, opts.HTTP)
	if err != nil {
		return nil, err
	}
	m := &Matcher{c: c, opts: opts, log: opts.Log, cache: map[[32]byte][]float32{}}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.br.now = opts.Now
	if m.br.now == nil {
		m.br.now = time.Now
	}
	if opts.CacheFile != "" {
		if err := m.load(); err != nil {
			m.log.Warn("embeddings cache not read; tools are embedded again", "file", opts.CacheFile, "err", err)
		}
	}
	return m, nil
}

// ToolText is what is embedded of a tool: its name's words, display
// name, intent, keywords and examples, one a line.
var ToolText = func(t *hldp.Tool) string {
	var b strings.Builder
	name := strings.NewReplacer("-", " ", "_", " ").Replace(t.Name)
	for _, s := range append([]string{name, t.Display, t.Intent, strings.Join(t.Keywords, ", ")}, t.Examples()...) {
		if s = strings.TrimSpace(s); s != "" {
			b.WriteString(s)
			b.WriteByte('\n')
		}
	}
	return strings.TrimSpace(b.String())
}

// textKey is the cache key of a tool's text under the model: an unchanged
// definition (as far as what is embedded goes) is never embedded again.
func (m *Matcher) textKey(text string) [32]byte {
	return sha256.Sum256([]byte(m.opts.Model + "\x00" + text))
}

// Watch keeps the tools' vectors current with the store's snapshots until
// ctx ends: at every swap, and every retryEvery while some tools have no
// vector.
func (m *Matcher) Watch(ctx context.Context, store *catalog.Store) {
	for {
		changed := store.Changed()
		if snap := store.Load(); snap != nil {
			m.Refresh(ctx, snap)
		}
		var retry <-chan time.Time
		var t *time.Timer
		if s := m.set.Load(); s != nil && s.missing > 0 {
			t = time.NewTimer(retryEvery)
			retry = t.C
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-retry:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// Refresh publishes the vectors of snap's callable tools: at once those
// cached, then, after asking the endpoint for the others in batches, all
// it gave. When the endpoint fails, the tools it did not embed are
// matched lexically alone until a later Refresh; the error says why.
func (m *Matcher) Refresh(ctx context.Context, snap *catalog.Snapshot) error {
	type tool struct {
		name string
		key  [32]byte
		text string
	}
	var tools []tool
	for e := range snap.Tools {
		text := ToolText(e.Tool)
		tools = append(tools, tool{e.Name, m.textKey(text), text})
	}
	publish := func() int {
		m.mu.Lock()
		defer m.mu.Unlock()
		s := &toolSet{gen: snap.Gen(), dims: m.dims, index: map[string]int{}}
		for _, t := range tools {
			v, ok := m.cache[t.key]
			if !ok {
				s.missing++
				continue
			}
			s.index[t.name] = len(s.names)
			s.names = append(s.names, t.name)
			s.vecs = append(s.vecs, v...)
		}
		s.signBits()
		m.set.Store(s)
		return s.missing
	}
	if publish() == 0 {
		return nil
	}
	var todo []tool
	m.mu.Lock()
	seen := map[[32]byte]bool{}
	for _, t := range tools {
		if _, ok := m.cache[t.key]; !ok && !seen[t.key] {
			seen[t.key] = true
			todo = append(todo, t)
		}
	}
	m.mu.Unlock()
	var err error
	for len(todo) > 0 {
		n := min(batchSize, len(todo))
		batch := todo[:n]
		texts := make([]string, n)
		for i, t := range batch {
			texts[i] = t.text
		}
		if ok, why := m.br.allow(); !ok {
			err = errors.New(why)
			break
		}
		m.mu.Lock()
		dims := m.dims
		m.mu.Unlock()
		bctx, cancel := context.WithTimeout(ctx, reloadTimeout)
		var vecs [][]float32
		vecs, err = m.c.Embed(bctx, texts, dims)
		cancel()
		m.br.done(err)
		if err != nil {
			break
		}
		m.mu.Lock()
		if m.dims == 0 {
			m.dims = len(vecs[0])
		}
		if len(vecs[0]) == m.dims {
			for i, t := range batch {
				m.cache[t.key] = vecs[i]
			}
			m.dirty = true
		}
		m.mu.Unlock()
		todo = todo[n:]
	}
	missing := publish()
	if err != nil {
		m.log.Warn("embeddings: tools left to lexical matching alone", "tools", missing, "err", err)
		err = fmt.Errorf("embeddings of %d tool(s): %w", missing, err)
	}
	if m.opts.CacheFile != "" {
		if serr := m.save(); serr != nil {
			m.log.Warn("embeddings cache not saved; a restart embeds the tools again", "file", m.opts.CacheFile, "err", serr)
		}
	}
	return err
}

// Status says how many callable tools of the last refreshed snapshot have
// a vector, and how many do not.
func (m *Matcher) Status() (with, without int) {
	s := m.set.Load()
	if s == nil {
		return 0, 0
	}
	return len(s.names), s.missing
}
