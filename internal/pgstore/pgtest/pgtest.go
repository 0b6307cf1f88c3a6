// Package pgtest gives tests a database of their own on the PostgreSQL
// server TOOLAGENT_TEST_POSTGRES_URL names (scripts/test-postgres.sh
// starts one; .ci/run does). Without it, the tests skip, saying how to
// start one.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// Cluster is a PostgreSQL server of a test's own, started with
// scripts/test-postgres.sh, which the test may stop and start again (same
// data, same port): for what a daemon does while its database is away.
type Cluster struct {
	// URL is the cluster's test database.
	URL    string
	script string
	dir    string
}

// NewCluster starts a cluster in a new directory and stops and removes
// it at the end of the test. Like URL, it skips without EnvURL (no
// PostgreSQL for the store tests on this machine).
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	if os.Getenv(EnvURL) == "" {
		t.Skipf("no PostgreSQL for the store tests: start one with `eval \"$(scripts/test-postgres.sh start $(mktemp -d -u))\"` (it sets %s)", EnvURL)
	}
	script, err := findScript()
	if err != nil {
		t.Fatal(err)
	}
	// A new path in the system's temporary directory, not under
	// t.TempDir (mode 0700: the server's user could not enter it); the
	// script makes it and stop removes it.
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{script: script, dir: filepath.Join(os.TempDir(), "toolagent-pg-"+hex.EncodeToString(b[:]))}
	out, err := exec.Command(script, "start", c.dir).Output()
	if err != nil {
		t.Fatalf("%s start: %v %s", script, err, stderrOf(err))
	}
	t.Cleanup(func() {
		if out, err := exec.Command(script, "stop", c.dir).CombinedOutput(); err != nil {
			t.Logf("%s stop: %v %s", script, err, out)
		}
	})
	_, line, ok := strings.Cut(strings.TrimSpace(string(out)), EnvURL+"=")
	if !ok {
		t.Fatalf("%s start printed %q; want %s=URL", script, out, EnvURL)
	}
	c.URL = line
	return c
}

// Stop stops the server (a fast shutdown: its sessions end); the data
// stays for Start.
func (c *Cluster) Stop(t testing.TB) { c.run(t, "pause") }

// Start starts the stopped server again, on the same port, with its data.
func (c *Cluster) Start(t testing.TB) { c.run(t, "resume") }

func (c *Cluster) run(t testing.TB, cmd string) {
	t.Helper()
	if out, err := exec.Command(c.script, cmd, c.dir).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v %s", c.script, cmd, err, out)
	}
}

// findScript finds scripts/test-postgres.sh above the working directory
// (a test runs in its package's directory).
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "scripts", "test-postgres.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("scripts/test-postgres.sh not found above the test's directory")
		}
		dir = up
	}
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
