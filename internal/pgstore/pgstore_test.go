package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

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
