package repo

import (
	"bufio"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/memory"
)

// fetchStats describes what the last incremental fetch received.
type fetchStats struct {
	objects int   // objects in the pack the server sent
	bytes   int64 // pack bytes received (after side-band demultiplexing)
}

// errNoBase reports that the clone has no fetched head to send as a have.
var errNoBase = errors.New("repo: no fetched head in clone to fetch a thin pack against")

// errThinUnsupported reports that the storage cannot take a pack file.
var errThinUnsupported = errors.New("repo: clone storage cannot write pack files")

// thinFetchLocked fetches the branch into the current clone asking the
// server for a thin pack, and points the remote-tracking ref at the
// fetched head. go-git's own fetch never asks for thin packs, so a depth-1
// fetch gets the whole new tree (every tree object on the changed path in
// full, plus every object the server cannot prove we hold); with a thin
// pack the server sends the changed objects as deltas against the ones we
// already have, a handful of objects for a one-file change.
//
// The thin pack is resolved against the clone's objects in memory and
// written back as an ordinary self-contained pack, so the store never holds
// a pack that refers outside itself. The received objects are held in
// memory until written, so this path is only taken when the clone has a
// fetched head to send as a have; without one it returns errNoBase. Nothing in the clone changes unless
// the whole pack was received and resolved; the shallow list and the ref
// are written last. Callers fall back to go-git's fetch on any error.
func (g *Git) thinFetchLocked(ctx context.Context, s gitSettings, auth transport.AuthMethod) (fetchStats, map[plumbing.Hash]plumbing.EncodedObject, error) {
	var st fetchStats
	var fetched map[plumbing.Hash]plumbing.EncodedObject
	sto := g.cur.repo.Storer
	pw, ok := sto.(storer.PackfileWriter)
	if !ok {
		return st, nil, errThinUnsupported
	}
	// go-git's fetch reads the clone's config and its remote; so does this,
	// so that a damaged clone still fails here and gets re-cloned.
	if _, err := g.cur.repo.Remote(remoteName); err != nil {
		return st, nil, fmt.Errorf("read clone config: %w", err)
	}
	ep, err := transport.NewEndpoint(s.url)
	if err != nil {
		return st, nil, err
	}
	cl, err := client.NewClient(ep)
	if err != nil {
		return st, nil, err
	}
	sess, err := cl.NewUploadPackSession(ep, auth)
	if err != nil {
		return st, nil, err
	}
	defer sess.Close()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return st, nil, err
	}
	branchRef := plumbing.NewBranchReferenceName(s.branch)
	want, ok := ar.References[branchRef.String()]
	if !ok {
		return st, nil, fmt.Errorf("%w: %s", ErrNoBranch, s.branch)
	}
	remoteRef := plumbing.NewRemoteReferenceName(remoteName, s.branch)

	if !hasCommitAndTree(sto, want) {
		req := packp.NewUploadPackRequestFromCapabilities(ar.Capabilities)
		// go-git filters thin-pack out of what the server advertised, since
		// its own fetch cannot store thin packs; this function can. Every
		// git upload-pack supports it, and a server that ignored it would
		// send an ordinary pack, which is handled the same way.
		caps := []capability.Capability{capability.ThinPack, capability.Shallow}
		if ar.Capabilities.Supports(capability.NoProgress) {
			caps = append(caps, capability.NoProgress)
		}
		for _, c := range caps {
			if err := req.Capabilities.Set(c); err != nil {
				return st, nil, err
			}
		}
		req.Depth = packp.DepthCommits(g.depth())
		req.Wants = []plumbing.Hash{want}
		if req.Shallows, err = sto.Shallow(); err != nil {
			return st, nil, err
		}
		ref, err := sto.Reference(remoteRef)
		if err != nil || !hasCommitAndTree(sto, ref.Hash()) {
			// Nothing to delta against: go-git's fetch streams the whole
			// pack to disk, where this would hold it in memory.
			return st, nil, errNoBase
		}
		req.Haves = []plumbing.Hash{ref.Hash()}
		if st, fetched, err = g.receiveThin(ctx, sess, req, sto, pw); err != nil {
			return st, nil, err
		}
		if !hasCommitAndTree(sto, want) {
			return st, nil, fmt.Errorf("fetched pack lacks commit %s or its tree", want)
		}
	}
	if err := sto.SetReference(plumbing.NewHashReference(remoteRef, want)); err != nil {
		return st, nil, err
	}
	return st, fetched, nil
}

// receiveThin sends req, resolves the (possibly thin) pack it gets against
// sto, writes the resolved objects to sto as one pack, and adds the
// server's new shallow commits to sto's shallow list. It returns the
// resolved objects too, for the new Tree to read without reading them back.
func (g *Git) receiveThin(ctx context.Context, sess transport.UploadPackSession, req *packp.UploadPackRequest, sto storage.Storer, pw storer.PackfileWriter) (st fetchStats, _ map[plumbing.Hash]plumbing.EncodedObject, err error) {
	resp, err := sess.UploadPack(ctx, req)
	if err != nil {
		return st, nil, err
	}
	defer resp.Close()
	var r io.Reader = resp
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		r = sideband.NewDemuxer(sideband.Sideband64k, resp)
	case req.Capabilities.Supports(capability.Sideband):
		r = sideband.NewDemuxer(sideband.Sideband, resp)
	}
	cr := &countingReader{r: r}

	// Resolve into memory: bases outside the pack come from sto.
	ov := &overlay{mem: memory.NewStorage(), base: sto}
	p, err := packfile.NewParserWithStorage(packfile.NewScanner(cr), ov)
	if err != nil {
		return st, nil, err
	}
	if _, err := p.Parse(); err != nil {
		return st, nil, fmt.Errorf("read fetched pack: %w", err)
	}
	st.bytes = cr.n
	hashes := make([]plumbing.Hash, 0, len(ov.mem.Objects))
	for h := range ov.mem.Objects {
		hashes = append(hashes, h)
	}
	st.objects = len(hashes)

	if len(hashes) > 0 {
		w, err := pw.PackfileWriter()
		if err != nil {
			return st, nil, err
		}
		err = writePack(w, ov.mem, hashes)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return st, nil, fmt.Errorf("store fetched objects: %w", err)
		}
	}

	if len(resp.Shallows) > 0 {
		shallows, err := sto.Shallow()
		if err != nil {
			return st, nil, err
		}
		have := make(map[plumbing.Hash]bool, len(shallows))
		for _, h := range shallows {
			have[h] = true
		}
		for _, h := range resp.Shallows {
			if !have[h] {
				have[h] = true
				shallows = append(shallows, h)
			}
		}
		if err := sto.SetShallow(shallows); err != nil {
			return st, nil, err
		}
	}
	return st, ov.mem.Objects, nil
}

// packLevel is the zlib level objects are stored at in the packs a thin
// fetch writes. Speed, not size: a push of one tool in 10,000 brings a
// tools tree object of 360 KB (mostly hashes, which do not compress),
// which go-git's encoder took 19 ms to compress at the default level on
// every push (BenchmarkWritePack), and those packs are few and replaced by
// the re-clone that compacts them (maxPacks).
const packLevel = zlib.NoCompression

// writePack writes the objects hashes of sto to w as a pack file (version
// 2, every object whole: they are the few a fetch brought), compressed at
// packLevel. go-git's own encoder has no level to choose.
func writePack(w io.Writer, sto storer.EncodedObjectStorer, hashes []plumbing.Hash) error {
	sum := sha1.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, sum), 64<<10)
	var head [12]byte
	copy(head[:], "PACK")
	binary.BigEndian.PutUint32(head[4:], 2)
	binary.BigEndian.PutUint32(head[8:], uint32(len(hashes)))
	bw.Write(head[:])
	zw, err := zlib.NewWriterLevel(bw, packLevel)
	if err != nil {
		return err
	}
	for _, h := range hashes {
		obj, err := sto.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return err
		}
		// The entry's header: the type in bits 4-6 of the first byte, the
		// size in its low 4 bits and 7 bits of each next byte, low first;
		// the top bit says another byte follows.
		size := uint64(obj.Size())
		b := byte(obj.Type())<<4 | byte(size&0x0f)
		size >>= 4
		var hdr []byte
		for size != 0 {
			hdr = append(hdr, b|0x80)
			b = byte(size & 0x7f)
			size >>= 7
		}
		bw.Write(append(hdr, b))
		r, err := obj.Reader()
		if err != nil {
			return err
		}
		zw.Reset(bw)
		_, err = io.Copy(zw, r)
		r.Close()
		if err == nil {
			err = zw.Close()
		}
		if err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err = w.Write(sum.Sum(nil))
	return err
}

// hasCommitAndTree reports whether s holds commit h and its root tree.
func hasCommitAndTree(s storer.EncodedObjectStorer, h plumbing.Hash) bool {
	c, err := object.GetCommit(s, h)
	if err != nil {
		return false
	}
	return s.HasEncodedObject(c.TreeHash) == nil
}

// overlay is an object store that keeps new objects in memory and reads
// missing ones from base, for resolving a thin pack's external deltas.
type overlay struct {
	mem  *memory.Storage
	base storer.EncodedObjectStorer
}

func (o *overlay) NewEncodedObject() plumbing.EncodedObject { return o.mem.NewEncodedObject() }

func (o *overlay) SetEncodedObject(obj plumbing.EncodedObject) (plumbing.Hash, error) {
	return o.mem.SetEncodedObject(obj)
}

func (o *overlay) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	obj, err := o.mem.EncodedObject(t, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return o.base.EncodedObject(t, h)
	}
	return obj, err
}

func (o *overlay) IterEncodedObjects(t plumbing.ObjectType) (storer.EncodedObjectIter, error) {
	return o.mem.IterEncodedObjects(t)
}

func (o *overlay) HasEncodedObject(h plumbing.Hash) error {
	if err := o.mem.HasEncodedObject(h); err == nil {
		return nil
	}
	return o.base.HasEncodedObject(h)
}

func (o *overlay) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	if sz, err := o.mem.EncodedObjectSize(h); err == nil {
		return sz, nil
	}
	return o.base.EncodedObjectSize(h)
}

func (o *overlay) AddAlternate(string) error { return errors.New("repo: overlay has no alternates") }

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
