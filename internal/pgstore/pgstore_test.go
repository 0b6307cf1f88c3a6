package pgstore_test

import (
	"context"
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
		s := pgstore.NewSlots(db, "replica-"+string(rune('a'+i)), 900*time.Millisecond)
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
