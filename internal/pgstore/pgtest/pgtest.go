// Package pgtest gives tests a database of their own on the PostgreSQL
// server TOOLAGENT_TEST_POSTGRES_URL names (scripts/test-postgres.sh
// starts one; .ci/run does). Without it, the tests skip, saying how to
// start one.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable with the test server's URL.
const EnvURL = "TOOLAGENT_TEST_POSTGRES_URL"

// URL creates a new, empty database on the test server and returns its
// URL; the database is dropped at the end of the test. The test is
// skipped when EnvURL is not set.
func URL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		t.Skipf("no PostgreSQL for the store tests: start one with `eval \"$(scripts/test-postgres.sh start $(mktemp -d -u))\"` (it sets %s), or set %s to a server where this user may create databases", EnvURL, EnvURL)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", EnvURL, err)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "toolagent_t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to %s: %v", EnvURL, err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() { drop(t, base, name) })
	u.Path = "/" + name
	return u.String()
}

// Drop drops the database of url (one URL made), closing its connections:
// for a test of what happens when the database goes away.
func Drop(t testing.TB, dbURL string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	drop(t, os.Getenv(EnvURL), u.Path[1:])
}

func drop(t testing.TB, base, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Logf("drop database %s: %v", name, err)
		return
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Logf("drop database %s: %v", name, err)
	}
}
