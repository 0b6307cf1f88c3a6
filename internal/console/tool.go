package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/toolagent/toolagent/internal/audit"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/hldp"
)

// paramRow is one param of a tool as its page lists it.
type paramRow struct {
	Name, Type, Description, Default string
	Required                         bool
	Enum                             []string
}

func paramRows(t *hldp.Tool) []paramRow {
	var out []paramRow
	for _, p := range t.Params {
		r := paramRow{Name: p.Name, Type: string(p.Type), Description: p.Description, Required: p.Required}
		for _, e := range p.Enum() {
			r.Enum = append(r.Enum, fmt.Sprint(e))
		}
		if d := p.Default(); d != nil {
			b, _ := json.Marshal(d)
			r.Default = string(b)
		}
		out = append(out, r)
	}
	return out
}

// toolLogLimit is how many commits a tool page lists.
const toolLogLimit = 20

func (c *Console) showTool(w http.ResponseWriter, r *http.Request, s *session, code int, sent map[string]string, res *dispatch.Result) {
	name := r.PathValue("name")
	_, e, ok := c.lookup(s, name)
	if !ok {
		c.render(w, r, s, http.StatusNotFound, "error", map[string]any{"Message": fmt.Sprintf(c.t(r, s, "err.notool"), name)})
		return
	}
	v := e.View(true)
	data := map[string]any{"Tool": v}
	if len(v.Argv) > 0 {
		data["Argv"] = compactJSON(v.Argv)
	}
	if v.Constraints != nil && len(v.Constraints.Rules) > 0 {
		data["Rules"] = compactJSON(v.Constraints.Rules)
	}
	if c.opts.Source != nil && e.File != "" {
		data["Raw"] = true
	}
	if c.opts.Links != nil {
		data["CommitURL"], data["FileURL"] = c.opts.Links(e.Rev, e.File)
	}
	if e.Tool != nil {
		data["Fields"] = formFields(e.Tool, sent)
		data["Params"] = paramRows(e.Tool)
	}
	if res != nil {
		data["Result"] = res
		data["ResultJSON"] = pretty(res)
	}
	// Its history in git: who changed it, when, why.
	if c.opts.ToolLog == nil {
		data["LogNote"] = c.t(r, s, "nohistory")
	} else if log, err := c.opts.ToolLog(name, toolLogLimit); err != nil {
		data["LogNote"] = err.Error()
	} else {
		data["Log"] = log
	}
	// Its callers' recent calls (a caller without the approve role sees
	// its own, as on the history page).
	if c.opts.History != nil {
		f := audit.Filter{Tool: name}
		if !s.user.CanApprove {
			f.Caller = s.user.Name
		}
		if recs, err := c.opts.History.Recent(f, 10); err == nil {
			data["Calls"] = historyRows(recs, nil)
		}
	}
	c.render(w, r, s, code, "tool", data)
}

// rawFile is the definition file as it is in the source, as plain text.
func (c *Console) rawFile(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("name")
	_, e, ok := c.lookup(s, name)
	if !ok || c.opts.Source == nil || e.File == "" {
		c.render(w, r, s, http.StatusNotFound, "error", map[string]any{"Message": fmt.Sprintf(c.t(r, s, "err.notool"), name)})
		return
	}
	b, err := c.opts.Source(e.File)
	if err != nil || len(b) > maxFileShown {
		c.render(w, r, s, http.StatusNotFound, "error", map[string]any{"Message": fmt.Sprintf("%s: %v", e.File, err)})
		return
	}
	// text/plain with nosniff (securityHeaders): a browser shows it, never
	// runs it.
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write(b)
}

// diffLine is one line of a diff with its kind (add, del, hunk, file,
// or ctx), for the page's colours.
type diffLine struct{ Kind, Text string }

func diffLines(d string) []diffLine {
	var out []diffLine
	for _, l := range strings.Split(strings.TrimSuffix(d, "\n"), "\n") {
		k := "ctx"
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"), strings.HasPrefix(l, "diff "):
			k = "file"
		case strings.HasPrefix(l, "@@"):
			k = "hunk"
		case strings.HasPrefix(l, "+"):
			k = "add"
		case strings.HasPrefix(l, "-"):
			k = "del"
		}
		out = append(out, diffLine{k, l})
	}
	return out
}

// diffPage shows the diff of a tool's folder between two revisions of
// its history (?from=&to=, full hashes; from empty: the folder's
// creation).
func (c *Console) diffPage(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("name")
	if _, _, ok := c.lookup(s, name); !ok {
		c.render(w, r, s, http.StatusNotFound, "error", map[string]any{"Message": fmt.Sprintf(c.t(r, s, "err.notool"), name)})
		return
	}
	if c.opts.ToolDiff == nil {
		c.render(w, r, s, http.StatusNotFound, "error", map[string]any{"Message": c.t(r, s, "nohistory")})
		return
	}
	q := r.URL.Query()
	from, to := q.Get("from"), q.Get("to")
	if to == "" {
		c.render(w, r, s, http.StatusBadRequest, "error", map[string]any{"Message": "to: want a commit hash of the tool's history"})
		return
	}
	d, err := c.opts.ToolDiff(r.Context(), name, from, to)
	if err != nil {
		c.render(w, r, s, http.StatusBadRequest, "error", map[string]any{"Message": err.Error()})
		return
	}
	data := map[string]any{"Name": name, "From": from, "To": to, "Empty": strings.TrimSpace(d) == ""}
	if len(d) > maxDiffShown {
		// Cut at a line's end; the page says it is cut.
		d = d[:strings.LastIndexByte(d[:maxDiffShown], '\n')+1]
		data["Cut"] = maxDiffShown
	}
	data["Lines"] = diffLines(d)
	c.render(w, r, s, http.StatusOK, "diff", data)
}

// maxDiffShown bounds the diff a page shows (a folder may hold large
// files).
const maxDiffShown = 1 << 20

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// Times are shown in the daemon's local time zone, with how long ago.
func localTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(time.Local).Format("2006-01-02 15:04:05 MST")
}

// ago is how long before now t was ("3 min ago"), or until it ("in 4
// min") when it is in the future, rounded for people.
func ago(now, t time.Time) (string, bool) {
	d := now.Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		s = fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
	default:
		s = fmt.Sprintf("%d d", int(d.Hours()/24))
	}
	return s, future
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
