package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolagent/toolagent/internal/audit"
	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/hldp"
)

// historyRow is one audit record as the history page shows it.
type historyRow struct {
	Time                                                                          time.Time
	Kind, Tool, Caller, Door, Status, Exit, Duration, Revision, ApprovalID, RunID string
}

// historyRows turns audit records into rows, leaving out the tools off
// the surface sf (nil: none left out).
func historyRows(recs []audit.Record, allows func(tool string) bool) []historyRow {
	var rows []historyRow
	for _, rec := range recs {
		tool := rec.Str("tool")
		if allows != nil && !allows(tool) {
			continue
		}
		at, _ := time.Parse(time.RFC3339Nano, rec.Str("time"))
		row := historyRow{Time: at, Kind: rec.Str("msg"), Tool: tool, Caller: rec.Str("caller"), Door: rec.Str("door"),
			Status: rec.Str("status"), Revision: rec.Str("revision"), ApprovalID: rec.Str("approval_id"), RunID: rec.Str("run_id")}
		if row.Kind == "approval" {
			row.Status, row.Caller = rec.Str("event"), rec.Str("decided_by")
		}
		if v, ok := rec["exit_code"].(float64); ok {
			row.Exit = strconv.Itoa(int(v))
		}
		if v, ok := rec["duration_ms"].(float64); ok {
			row.Duration = strconv.Itoa(int(v)) + " ms"
		}
		rows = append(rows, row)
	}
	return rows
}

// surfaceAllows reports whether a tool (by name, judged by its current
// definition) is on sf; nil when sf leaves every tool.
func (c *Console) surfaceAllows(sf catalog.Surface) func(string) bool {
	if len(sf) == 0 {
		return nil
	}
	snap := c.store.Load()
	return func(tool string) bool {
		var t *hldp.Tool
		if snap != nil {
			if e, ok := snap.Lookup(tool); ok {
				t = e.Tool
			}
		}
		return sf.Allows(tool, t)
	}
}

const (
	// historyPageSize rows a page; historyScan records at most are read
	// for one page (the newest).
	historyPageSize = 50
	historyScan     = 5000
	// timeInput is the format of an <input type="datetime-local">, read
	// in the daemon's time zone.
	timeInput = "2006-01-02T15:04"
)

// historyPage lists recent calls and decisions from the audit trail,
// newest first, filtered by tool, caller, status and time (from, to:
// local times), fifty a page (?page=N); a session sees only the tools on
// its surface, and a caller without the approve role only its own calls.
func (c *Console) historyPage(w http.ResponseWriter, r *http.Request, s *session) {
	if c.opts.History == nil {
		c.render(w, r, s, http.StatusOK, "error", map[string]any{"Message": c.t(r, s, "err.nohistory")})
		return
	}
	q := r.URL.Query()
	f := audit.Filter{Tool: strings.TrimSpace(q.Get("tool")), Caller: strings.TrimSpace(q.Get("caller")), Status: strings.TrimSpace(q.Get("status"))}
	if !s.user.CanApprove {
		f.Caller = s.user.Name
	}
	var from, to time.Time
	var problems []string
	if v := q.Get("from"); v != "" {
		t, err := time.ParseInLocation(timeInput, v, time.Local)
		if err != nil {
			problems = append(problems, "from: want a time as 2026-12-04T09:30, got "+strconv.Quote(v))
		}
		from = t
	}
	if v := q.Get("to"); v != "" {
		t, err := time.ParseInLocation(timeInput, v, time.Local)
		if err != nil {
			problems = append(problems, "to: want a time as 2026-12-04T17:00, got "+strconv.Quote(v))
		}
		to = t.Add(time.Minute) // the whole minute named
	}
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	recs, err := c.opts.History.Recent(f, historyScan)
	if err != nil {
		c.render(w, r, s, http.StatusInternalServerError, "error", map[string]any{"Message": err.Error()})
		return
	}
	var rows []historyRow
	for _, row := range historyRows(recs, c.surfaceAllows(s.user.surface())) {
		if (!from.IsZero() && row.Time.Before(from)) || (!to.IsZero() && !row.Time.Before(to)) {
			continue
		}
		rows = append(rows, row)
	}
	data := map[string]any{"Filter": f, "From": q.Get("from"), "To": q.Get("to"), "Page": page, "Problems": problems}
	start := (page - 1) * historyPageSize
	if start < len(rows) {
		end := min(start+historyPageSize, len(rows))
		data["Rows"] = rows[start:end]
		if end < len(rows) {
			data["Next"] = pageLink(q, page+1)
		}
	}
	if page > 1 {
		data["Prev"] = pageLink(q, page-1)
	}
	c.render(w, r, s, http.StatusOK, "history", data)
}

// pageLink is the history page's address with q's filters at page n.
func pageLink(q url.Values, n int) string {
	v := url.Values{}
	for _, k := range []string{"tool", "caller", "status", "from", "to"} {
		if x := q.Get(k); x != "" {
			v.Set(k, x)
		}
	}
	v.Set("page", strconv.Itoa(n))
	return "/ui/history?" + v.Encode()
}
