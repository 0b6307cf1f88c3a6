package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolagent/toolagent/internal/pgstore"
	"github.com/toolagent/toolagent/internal/pgstore/pgtest"
)

// TestOpenMigratesOnceWhenReplicasStartAtOnce: eight replicas opening one
// new database at once each end with the whole schema, and every
// migration was applied exactly once (the advisory lock).
func TestOpenMigratesOnceWhenReplicasStartAtOnce(t *testing.T) {
	url := pgtest.URL(t)
	var wg sync.WaitGroup
	dbs := make([]*pgstore.DB, 8)
	errs := make([]error, 8)
	for i := range dbs {
		wg.Go(func() { dbs[i], errs[i] = pgstore.Open(t.Context(), url) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: Open: %v", i, err)
		}
		defer dbs[i].Close()
		if dbs[i].Version < 1 {
			t.Errorf("replica %d: schema version %d", i, dbs[i].Version)
		}
	}
	var applied, distinct int
	if err := dbs[0].Pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT version) FROM toolagent_schema`).Scan(&applied, &distinct); err != nil {
		t.Fatal(err)
	}
	if applied != dbs[0].Version || distinct != applied {
		t.Errorf("toolagent_schema has %d rows (%d versions); want each of the %d migrations once", applied, distinct, dbs[0].Version)
	}
}

// TestCheckURL: a password in the URL (user info or the password
// parameter) is refused, naming where it belongs; a URL without one, or
// of another scheme, is judged as it is.
func TestCheckURL(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"postgres://toolagent@db.example:5432/toolagent", ""},
		{"postgresql://db.example/toolagent?sslmode=require", ""},
		{"postgres://toolagent:hunter2@db.example/toolagent", "PGPASSWORD"},
		{"postgres://db.example/toolagent?password=hunter2", "PGPASSWORD"},
		{"mysql://db.example/toolagent", "scheme"},
	} {
		err := pgstore.CheckURL(c.url)
		if (c.want == "") != (err == nil) || err != nil && (!strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2")) {
			t.Errorf("CheckURL(%s) = %v; want %q in the error (and never the password)", c.url, err, c.want)
		}
	}
}

// TestOpenUnreachable: a database that is not there is an error naming
// where it was looked for, without the URL's secrets.
func TestOpenUnreachable(t *testing.T) {
	_, err := pgstore.Open(t.Context(), "postgres://toolagent@127.0.0.1:1/nowhere?sslmode=disable&connect_timeout=5")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1/nowhere") {
		t.Errorf("Open(port 1) = %v; want a connection error naming 127.0.0.1:1/nowhere", err)
	}
}

// TestSlotsAcrossReplicas: max_concurrency 2 held by three replicas at
// once: two calls hold slots, the third is busy; a released slot is taken
// again; a replica that dies holding one (no release, no renewal) frees it
// once its lease is past, and a live replica's renewed lease holds.
func TestSlotsAcrossReplicas(t *testing.T) {
	url := pgtest.URL(t)
	var rs []*pgstore.Slots
	for i := range 3 {
		db, err := pgstore.Open(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		s := pgstore.NewSlots(db, "replica-"+string(rune('a'+i)), 900*time.Millisecond, nil)
		defer s.Close()
		rs = append(rs, s)
	}
	var wg sync.WaitGroup
	type got struct {
		release func()
		ok      bool
		err     error
	}
	res := make([]got, 3)
	for i, s := range rs {
		wg.Go(func() {
			r, ok, err := s.Acquire(t.Context(), "deploy", 2)
			res[i] = got{r, ok, err}
		})
	}
	wg.Wait()
	held := 0
	for i, g := range res {
		if g.err != nil {
			t.Fatalf("replica %d: %v", i, g.err)
		}
		if g.ok {
			held++
		}
	}
	if held != 2 {
		t.Fatalf("three replicas took %d of 2 slots; want exactly 2", held)
	}
	// Release one; the busy replica now gets it.
	for i, g := range res {
		if g.ok {
			g.release()
			busy := (i + 1) % 3
			for res[busy].ok {
				busy = (busy + 1) % 3
			}
			r, ok, err := rs[busy].Acquire(t.Context(), "deploy", 2)
			if err != nil || !ok {
				t.Fatalf("after a release, replica %d: ok %v err %v; want a slot", busy, ok, err)
			}
			defer r()
			res[i].ok = false
			break
		}
	}
	if _, ok, _ := rs[0].Acquire(t.Context(), "deploy", 2); ok {
		t.Fatal("a third slot was given while two are held")
	}
	// The replica still holding its first slot dies (no renewal); the
	// slot is free once the lease is past.
	for i, g := range res {
		if g.ok {
			rs[i].Close()
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	var last error
	for {
		r, ok, err := rs[2].Acquire(t.Context(), "deploy", 2)
		if ok {
			r()
			break
		}
		last = err
		if time.Now().After(deadline) {
			t.Fatalf("a dead replica's slot was not freed by its lease (last err %v)", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSlotsThroughAnOutage: a call that ends while the database is
// stopped cannot free its slot then; the release is owed, Acquire says
// the shared store is unavailable (with a cause that names neither the
// password, the host, the user nor the database), and once the server is
// started again the slot is released by this replica (holder cleared, not
// left to its lease) and taken again.
func TestSlotsThroughAnOutage(t *testing.T) {
	c := pgtest.NewCluster(t)
	u, err := url.Parse(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	const password = "pw-0f1e2d3c4b5a" // the test cluster trusts loopback: any password connects
	u.User = url.UserPassword("toolagent", password)
	db, err := pgstore.Open(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := pgstore.NewSlots(db, "replica-a", time.Minute, nil)
	defer s.Close()
	release, ok, err := s.Acquire(t.Context(), "deploy", 1)
	if err != nil || !ok {
		t.Fatalf("Acquire with the database up: ok %v err %v", ok, err)
	}
	// A replica that stops while it still owes a release says so.
	var logs syncBuf
	stopping := pgstore.NewSlots(db, "replica-b", time.Minute, slog.New(slog.NewTextHandler(&logs, nil)))
	releaseB, ok, err := stopping.Acquire(t.Context(), "backup", 1)
	if err != nil || !ok {
		t.Fatalf("Acquire with the database up: ok %v err %v", ok, err)
	}
	c.Stop(t)
	release() // the call ended during the outage
	if n := s.Owed(); n != 1 {
		t.Errorf("Owed() = %d after a release during the outage; want 1", n)
	}
	releaseB()
	stopping.Close()
	if l := logs.String(); !strings.Contains(l, "tool=backup") || !strings.Contains(l, "stays held until its lease passes") {
		t.Errorf("Close with a release owed logged %q; want a warning naming the tool and what happens to its slot", l)
	}
	_, ok, err = s.Acquire(t.Context(), "deploy", 1)
	if ok || !errors.Is(err, pgstore.ErrUnavailable) || !strings.HasPrefix(err.Error(), "shared store unavailable: ") {
		t.Fatalf("Acquire with the database stopped: ok %v err %v; want ErrUnavailable", ok, err)
	}
	for _, secret := range []string{password, u.Host, u.Port(), "toolagent_test", "user="} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the outage's cause %q shows %q", err, secret)
		}
	}
	if _, err := db.Pool.Exec(t.Context(), `SELECT 1`); err != nil {
		cause, ok := db.Outage(err)
		if !ok || strings.Contains(cause, password) || strings.Contains(cause, u.Port()) {
			t.Errorf("Outage(%v) = %q, %v; want an outage, described without the password or the address", err, cause, ok)
		}
	}
	c.Start(t)
	check, err := pgstore.Open(t.Context(), c.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		var holder *string
		err := check.Pool.QueryRow(t.Context(), `SELECT holder FROM toolagent_slots WHERE tool = 'deploy' AND slot = 1`).Scan(&holder)
		if err == nil && holder == nil && s.Owed() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot of the call that ended during the outage is still held a minute after the database returned (holder %v, err %v, owed %d)", holder, err, s.Owed())
		}
		time.Sleep(20 * time.Millisecond)
	}
	release, ok, err = s.Acquire(t.Context(), "deploy", 1)
	if err != nil || !ok {
		t.Fatalf("Acquire once the database is back: ok %v err %v; want the released slot", ok, err)
	}
	release()
}

// syncBuf is a bytes.Buffer safe for a logger and a test at once.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
