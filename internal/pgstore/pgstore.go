// Package pgstore is the daemon's connection to PostgreSQL, the shared
// store of replicas (approvals now; audit and limits are to follow): a
// pgx connection pool and the schema, created and migrated at Open.
//
// Migrations are numbered and applied in order, each in a transaction
// that records its number in toolagent_schema. Open holds a session
// advisory lock while it migrates, so replicas that start at once apply
// each migration exactly once: the others wait, then find it applied.
//
// Imports: pgx only; imported by approval (its PGStore) and cmd.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrateLock is the advisory lock key Open migrates under ("toolagent"
// in ASCII, as a number).
const migrateLock = 0x746f6f6c6167

// migrations are the schema, in order; migration i+1 is migrations[i].
// A released migration is never edited: a change is a new one.
var migrations = []string{
	// 1: approvals. doc is the request as JSON, as the file store writes
	// it (numbers keep their spelling, so hashes stay stable); the other
	// columns are what the conditional updates test and the lists sort
	// by. version grows with every change: an update that names the
	// version it read changes nothing when another replica got there
	// first.
	`CREATE TABLE toolagent_approvals (
		id          text PRIMARY KEY,
		status      text NOT NULL,
		version     bigint NOT NULL,
		created_at  timestamptz NOT NULL,
		expires_at  timestamptz NOT NULL,
		claimed_by  text,
		lease_until timestamptz,
		doc         text NOT NULL
	);
	CREATE INDEX toolagent_approvals_by_status ON toolagent_approvals (status, created_at, id)`,
	// 2: the audit trail (internal/audit's PG). Append-only: a trigger
	// refuses updates and deletes; each row carries the hash of the row
	// before, so what an owner removes or edits with the trigger off is
	// still found by audit verify.
	`CREATE TABLE toolagent_audit (
		seq       bigserial PRIMARY KEY,
		at        timestamptz NOT NULL DEFAULT now(),
		replica   text NOT NULL,
		record    text NOT NULL,
		prev_hash text NOT NULL,
		hash      text NOT NULL
	);
	CREATE FUNCTION toolagent_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		RAISE EXCEPTION 'toolagent_audit is append-only';
	END $$;
	CREATE TRIGGER toolagent_audit_append_only BEFORE UPDATE OR DELETE ON toolagent_audit
		FOR EACH ROW EXECUTE FUNCTION toolagent_audit_append_only()`,
	// 3: concurrency slots of constraints.max_concurrency across
	// replicas (slots.go): a slot is free when it has no holder or its
	// holder's lease is past.
	`CREATE TABLE toolagent_slots (
		tool        text NOT NULL,
		slot        int NOT NULL,
		holder      text,
		lease_until timestamptz,
		PRIMARY KEY (tool, slot)
	)`,
	// 4: the revision each replica serves (broadcast.go), for "the
	// newest any replica has seen" in every replica's status.
	`CREATE TABLE toolagent_replicas (
		replica  text PRIMARY KEY,
		revision text NOT NULL,
		seen_at  timestamptz NOT NULL
	)`,
	// 5: idempotent holds (approval's Hold): while a request is pending,
	// the same caller asking the same call (tool, revision, params) gets
	// it back. Rows made before have no key and never conflict.
	`ALTER TABLE toolagent_approvals ADD COLUMN hold_key text;
	CREATE UNIQUE INDEX toolagent_approvals_pending_hold ON toolagent_approvals (hold_key) WHERE status = 'pending'`,
	// 6: a slot's lease id (slots.go): every Acquire gives the slot a
	// new one, and a release names the one it took, so a release retried
	// after an outage never frees a later hold of the same slot. Rows
	// made before have none and are released by holder, as before.
	`ALTER TABLE toolagent_slots ADD COLUMN lease_id text`,
	// 7: audit export cursors (internal/audit's export): per sink, the
	// seq of toolagent_audit up to which records were sent. A replica
	// sends a batch while it holds the sink's row (FOR UPDATE SKIP
	// LOCKED), so replicas never send the same batch twice.
	`CREATE TABLE toolagent_audit_export (
		sink       text PRIMARY KEY,
		seq        bigint NOT NULL DEFAULT 0,
		updated_at timestamptz NOT NULL DEFAULT now()
	)`,
}

// DB is an open, migrated database.
type DB struct {
	Pool *pgxpool.Pool
	// Version is the schema version after Open.
	Version int
	// password is the one the pool connects with (from the URL, the
	// environment or ~/.pgpass), kept only to cut it out of the causes
	// Outage describes.
	password string
}

// CheckURL refuses a connection URL that carries a password: it would
// be in a flag or a config file, which others can read (ps, backups).
// The password belongs in PGPASSWORD, a ~/.pgpass file, or the whole URL
// in the environment variable the config names.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("store URL: %v", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Errorf("store URL: scheme %q; want postgres://", u.Scheme)
	}
	if _, ok := u.User.Password(); ok || u.Query().Has("password") {
		return errors.New("store URL: it carries a password: put the password in PGPASSWORD or ~/.pgpass, or the whole URL in the environment variable store_url_env names, never in a flag or the config file")
	}
	return nil
}

// Open connects to the database at url and migrates its schema. The
// error names what failed: the connection, or the migration.
func Open(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store: %v", redact(err))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: connect: %v", redact(err))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: connect to %s:%d/%s: %v", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, redact(err))
	}
	db := &DB{Pool: pool, password: cfg.ConnConfig.Password}
	if db.Version, err = migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

// redact drops what pgx's errors may quote of a connection string: a
// parse error quotes it, and hides a password there only on a best
// effort.
func redact(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("cannot parse the connection URL")
	}
	return err
}

// Close closes the pool.
func (db *DB) Close() { db.Pool.Close() }

// migrate applies the migrations the database lacks, under the advisory
// lock, and returns the schema version.
func migrate(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: migrate: %v", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrateLock)); err != nil {
		return 0, fmt.Errorf("store: migrate: take the lock: %v", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrateLock))
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS toolagent_schema (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return 0, fmt.Errorf("store: migrate: %v", err)
	}
	var have int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM toolagent_schema`).Scan(&have); err != nil {
		return 0, fmt.Errorf("store: migrate: read the schema version: %v", err)
	}
	if have > len(migrations) {
		return 0, fmt.Errorf("store: the database's schema is version %d, newer than this toolagent knows (%d): run a newer toolagent", have, len(migrations))
	}
	for v := have + 1; v <= len(migrations); v++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO toolagent_schema (version) VALUES ($1)`, v)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("store: migration %d: %v", v, err)
		}
	}
	return len(migrations), nil
}
