package audit_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/toolagent/toolagent/internal/audit"
	"github.com/toolagent/toolagent/internal/pgstore"
	"github.com/toolagent/toolagent/internal/pgstore/pgtest"
)

func openDB(t *testing.T, url string) *pgstore.DB {
	t.Helper()
	db, err := pgstore.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

// TestPGChainAcrossReplicas: two replicas write 200 records each at once;
// after Close (which writes what is queued) all 400 are rows in one
// chain that verifies, and Recent filters and orders them.
func TestPGChainAcrossReplicas(t *testing.T) {
	url := pgtest.URL(t)
	dbs := []*pgstore.DB{openDB(t, url), openDB(t, url)}
	var wg sync.WaitGroup
	for i, db := range dbs {
		wg.Go(func() {
			st := audit.OpenPG(db, fmt.Sprintf("replica-%d", i), nil)
			log := slog.New(st.Handler())
			for k := range 200 {
				log.Info("call", "tool", fmt.Sprintf("tool-%d", k%4), "caller", "alice", "status", "success", "n", k)
			}
			st.Close()
		})
	}
	wg.Wait()
	res, err := audit.Verify(t.Context(), dbs[0])
	if err != nil || res.Rows != 400 || res.Broken != "" || len(res.Head) != 64 {
		t.Fatalf("Verify = %+v, %v; want 400 rows in one unbroken chain", res, err)
	}
	st := audit.OpenPG(dbs[1], "reader", nil)
	defer st.Close()
	recent, err := st.Recent(audit.Filter{Tool: "tool-3"}, 10)
	if err != nil || len(recent) != 10 {
		t.Fatalf("Recent(tool-3, 10) = %d records, %v", len(recent), err)
	}
	for _, r := range recent {
		if r.Str("tool") != "tool-3" {
			t.Errorf("Recent(tool-3) returned %v", r)
		}
	}
	var out bytes.Buffer
	n, err := audit.Export(t.Context(), dbs[0], &out)
	if err != nil || n != 400 || strings.Count(out.String(), "\n") != 400 || !strings.Contains(out.String(), `"prev_hash":""`) {
		t.Errorf("Export = %d rows, %v; want 400 JSON lines, the first with an empty prev_hash", n, err)
	}
}

// TestPGChainDetectsTampering: the table refuses updates and deletes; an
// owner who turns that off and deletes a row, or edits one, breaks the
// chain, and Verify names the row.
func TestPGChainDetectsTampering(t *testing.T) {
	db := openDB(t, pgtest.URL(t))
	st := audit.OpenPG(db, "r", nil)
	log := slog.New(st.Handler())
	for k := range 10 {
		log.Info("call", "tool", "t", "n", k)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `DELETE FROM toolagent_audit WHERE seq = 4`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("DELETE of an audit row = %v; want refused: append-only", err)
	}
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE toolagent_audit DISABLE TRIGGER USER`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE toolagent_audit SET record = replace(record, '"n":7', '"n":70') WHERE seq = 8`); err != nil {
		t.Fatal(err)
	}
	res, err := audit.Verify(ctx, db)
	if err != nil || res.Rows != 7 || !strings.Contains(res.Broken, "row 8") || !strings.Contains(res.Broken, "edited") {
		t.Errorf("Verify after editing row 8 = %+v, %v; want it named, 7 good rows before", res, err)
	}
	if _, err := db.Pool.Exec(ctx, `DELETE FROM toolagent_audit WHERE seq = 4`); err != nil {
		t.Fatal(err)
	}
	res, err = audit.Verify(ctx, db)
	if err != nil || res.Rows != 3 || !strings.Contains(res.Broken, "row 5") || !strings.Contains(res.Broken, "removed") {
		t.Errorf("Verify after deleting row 4 = %+v, %v; want the break at row 5 named", res, err)
	}
}
