package embed

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// The cache file: cacheMagic, the model's name (uint32 length, bytes),
// the dimension and the count (uint32 each), then per vector its key (32
// bytes) and its values (float32), all little-endian. A file of another
// model is ignored: its vectors are not comparable.
const cacheMagic = "toolagent embeddings cache 1\n"

// maxCacheVectors bounds what a cache file may claim to hold.
const maxCacheVectors = 1 << 22

// load reads the cache file into m.cache.
func (m *Matcher) load() error {
	f, err := os.Open(m.opts.CacheFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	magic := make([]byte, len(cacheMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != cacheMagic {
		return errors.New("not an embeddings cache of this version")
	}
	var n uint32
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil || n > 4096 {
		return errors.New("bad model name length")
	}
	model := make([]byte, n)
	if _, err := io.ReadFull(r, model); err != nil {
		return err
	}
	if string(model) != m.opts.Model {
		return nil // another model's vectors
	}
	var hdr [2]uint32
	if err := binary.Read(r, binary.LittleEndian, &hdr); err != nil {
		return err
	}
	dims, count := int(hdr[0]), int(hdr[1])
	if dims <= 0 || dims > MaxDims || count > maxCacheVectors {
		return fmt.Errorf("bad header: %d dimensions, %d vectors", dims, count)
	}
	cache := make(map[[32]byte][]float32, count)
	for range count {
		var key [32]byte
		if _, err := io.ReadFull(r, key[:]); err != nil {
			return fmt.Errorf("truncated: %w", err)
		}
		v := make([]float32, dims)
		if err := binary.Read(r, binary.LittleEndian, v); err != nil {
			return fmt.Errorf("truncated: %w", err)
		}
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return errors.New("a value is not a finite number")
			}
		}
		cache[key] = v
	}
	m.mu.Lock()
	m.cache, m.dims = cache, dims
	m.mu.Unlock()
	return nil
}

// save writes m.cache to the cache file when it changed since, through a
// temporary file renamed over it.
func (m *Matcher) save() error {
	m.saveMu.Lock()
	defer m.saveMu.Unlock()
	m.mu.Lock()
	if !m.dirty || m.dims == 0 {
		m.mu.Unlock()
		return nil
	}
	m.dirty = false
	dims := m.dims
	keys := make([][32]byte, 0, len(m.cache))
	vecs := make([][]float32, 0, len(m.cache))
	for k, v := range m.cache {
		keys, vecs = append(keys, k), append(vecs, v)
	}
	m.mu.Unlock()
	tmp, err := os.CreateTemp(filepath.Dir(m.opts.CacheFile), ".embeddings-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriter(tmp)
	w.WriteString(cacheMagic)
	binary.Write(w, binary.LittleEndian, uint32(len(m.opts.Model)))
	w.WriteString(m.opts.Model)
	binary.Write(w, binary.LittleEndian, [2]uint32{uint32(dims), uint32(len(keys))})
	for i, k := range keys {
		w.Write(k[:])
		binary.Write(w, binary.LittleEndian, vecs[i])
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), m.opts.CacheFile)
}
