// Package embed is the optional embeddings backend of intent matching
// (match_embeddings, docs/matching.md): a client of an OpenAI-compatible
// POST /v1/embeddings endpoint (Ollama, llama.cpp server, TEI, vLLM, the
// test server in scripts/embed-server), the tools' vectors computed at
// reload and cached by the hash of the text embedded, and a Matcher that
// fuses the request's vector ranking with the lexical one by reciprocal
// rank fusion. The endpoint is never trusted: its answers are checked
// (count, indexes, dimension, finite values, size), a deadline bounds
// every query, and a circuit breaker stops waiting on a dead endpoint; in
// every such case matching is the lexical one and the answer says why.
package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Limits on what an endpoint may answer.
const (
	// MaxDims is the most dimensions a vector may have.
	MaxDims = 8192
	// maxBytesPerText bounds the answer per text asked: MaxDims numbers of
	// up to 24 characters, and room for the envelope.
	maxBytesPerText = MaxDims*25 + 1024
	// maxErrorText is how much of an error answer an error quotes.
	maxErrorText = 200
)

// Client calls an OpenAI-compatible embeddings endpoint. It is safe for
// concurrent use.
type Client struct {
	endpoint string // URL + /v1/embeddings
	model    string
	key      string // sent as a bearer token; never in an error or a log
	http     *http.Client
}

// NewClient returns a client of the endpoint at base (scheme://host[:port]
// [/prefix]; /v1/embeddings is appended) for model. key, when not empty,
// is sent as "Authorization: Bearer KEY".
func NewClient(base, model, key string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("match_embeddings.url %q: want http:// or https://host[:port][/prefix], without credentials", redactURL(base))
	}
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{endpoint: strings.TrimRight(u.String(), "/") + "/v1/embeddings", model: model, key: key, http: hc}, nil
}

// redactURL drops user information from a URL for an error message.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		u.User = nil
		return u.String()
	}
	return s
}

type embedRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

type embedResponse struct {
	Data []struct {
		Embedding []float64 `json:"embedding"`
		Index     *int      `json:"index"`
	} `json:"data"`
}

// Embed returns one unit vector per text, in the order of texts, all of
// one dimension; dims, when above 0, is the dimension they must have. An
// answer that is not that (another count, a missing or repeated index, a
// dimension that differs, a value that is not finite, a zero vector, a
// body larger than the texts justify) is an error that says what was
// wrong.
func (c *Client) Embed(ctx context.Context, texts []string, dims int) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	for i, t := range texts {
		if !utf8.ValidString(t) {
			texts[i] = strings.ToValidUTF8(t, "\uFFFD")
		}
	}
	body, err := json.Marshal(embedRequest{Model: c.model, Input: texts})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.scrub(err)
	}
	defer resp.Body.Close()
	limit := int64(len(texts))*maxBytesPerText + 4096
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", c.scrub(err))
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("the answer is over %d bytes for %d text(s); rejected", limit, len(texts))
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, c.quote(data))
	}
	var er embedResponse
	if err := json.Unmarshal(data, &er); err != nil {
		return nil, fmt.Errorf("the answer is not an embeddings list: %v", err)
	}
	if len(er.Data) != len(texts) {
		return nil, fmt.Errorf("the answer has %d vectors for %d text(s)", len(er.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	for i, d := range er.Data {
		at := i
		if d.Index != nil {
			at = *d.Index
		}
		switch {
		case at < 0 || at >= len(texts):
			return nil, fmt.Errorf("data[%d].index %d is out of range 0..%d", i, at, len(texts)-1)
		case out[at] != nil:
			return nil, fmt.Errorf("data[%d].index %d is given twice", i, at)
		case len(d.Embedding) == 0 || len(d.Embedding) > MaxDims:
			return nil, fmt.Errorf("data[%d].embedding has %d dimensions; want 1 to %d", i, len(d.Embedding), MaxDims)
		case dims > 0 && len(d.Embedding) != dims:
			return nil, fmt.Errorf("data[%d].embedding has %d dimensions; want %d, as the other vectors of model %q", i, len(d.Embedding), dims, c.model)
		}
		dims = len(d.Embedding)
		v, err := unit(d.Embedding)
		if err != nil {
			return nil, fmt.Errorf("data[%d].embedding: %v", i, err)
		}
		out[at] = v
	}
	return out, nil
}

// unit returns x scaled to length 1 as float32s.
func unit(x []float64) ([]float32, error) {
	var n float64
	for j, f := range x {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("value %d is not a finite number", j)
		}
		n += f * f
	}
	if n == 0 || math.IsInf(n, 0) {
		return nil, errors.New("the vector has no usable length")
	}
	n = math.Sqrt(n)
	v := make([]float32, len(x))
	for j, f := range x {
		v[j] = float32(f / n)
	}
	return v, nil
}

// quote returns a short printable excerpt of an error answer, without the
// key should the endpoint echo it.
func (c *Client) quote(data []byte) string {
	var e struct {
		Error any `json:"error"`
	}
	s := string(data)
	if json.Unmarshal(data, &e) == nil && e.Error != nil {
		if m, ok := e.Error.(map[string]any); ok && m["message"] != nil {
			s = fmt.Sprint(m["message"])
		} else {
			s = fmt.Sprint(e.Error)
		}
	}
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	if len(s) > maxErrorText {
		s = s[:maxErrorText] + "…"
	}
	return c.scrubText(s)
}

// scrub returns err with the key, should any part of it hold it, replaced.
func (c *Client) scrub(err error) error {
	if c.key == "" || !strings.Contains(err.Error(), c.key) {
		return err
	}
	return errors.New(c.scrubText(err.Error()))
}

func (c *Client) scrubText(s string) string {
	if c.key == "" {
		return s
	}
	return strings.ReplaceAll(s, c.key, "[key]")
}
