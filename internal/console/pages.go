package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/dispatch"
	"github.com/toolagent/toolagent/internal/hldp"
)

// catalogPage lists the tools on the session's surface, the callable
// first, filtered by status and tag (?status=, ?tag=), with the intent
// search (?q=, the matcher's 1–3 candidates).
func (c *Console) catalogPage(w http.ResponseWriter, r *http.Request, s *session) {
	snap := c.store.Load()
	if snap == nil {
		c.render(w, r, s, http.StatusServiceUnavailable, "error", map[string]any{"Message": c.t(r, s, "err.notloaded")})
		return
	}
	q := r.URL.Query()
	status, tag := q.Get("status"), q.Get("tag")
	sf := s.user.surface()
	var callable, other []catalog.ToolView
	tags, statuses := map[string]bool{}, map[string]bool{}
	for _, e := range sf.Filter(snap.All()) {
		v := e.View(false)
		for _, t := range v.Tags {
			tags[t] = true
		}
		statuses[string(v.Status)] = true
		if (status != "" && string(v.Status) != status) || (tag != "" && !slices.Contains(v.Tags, tag)) {
			continue
		}
		if e.Status.Callable() {
			callable = append(callable, v)
		} else {
			other = append(other, v)
		}
	}
	data := map[string]any{"Tools": append(callable, other...), "Revision": snap.Rev(), "Status": status, "Tag": tag,
		"Tags": slices.Sorted(mapsKeys(tags)), "Statuses": slices.Sorted(mapsKeys(statuses)), "Total": snap.Len()}
	if qs := strings.TrimSpace(q.Get("q")); qs != "" {
		data["Query"] = qs
		data["Match"] = snap.MatchIntentOn(qs, catalog.MaxCandidates, sf)
	}
	c.render(w, r, s, http.StatusOK, "catalog", data)
}

// field is one input of the try-a-call form.
type field struct {
	Name, Type, Description string
	Required                bool
	Enum                    []string
	Value                   string
	Multiline               bool
}

// formFields builds the try-a-call form of t: a field per param of the
// right kind, an enum as a select, defaults filled in (or the values the
// visitor sent).
func formFields(t *hldp.Tool, sent map[string]string) []field {
	var out []field
	for _, p := range t.Params {
		f := field{Name: p.Name, Type: string(p.Type), Description: p.Description, Required: p.Required}
		for _, e := range p.Enum() {
			f.Enum = append(f.Enum, fmt.Sprint(e))
		}
		if p.Default() != nil {
			switch d := p.Default().(type) {
			case string:
				f.Value = d
			default:
				b, _ := json.Marshal(d)
				f.Value = string(b)
			}
		}
		if v, ok := sent[p.Name]; ok {
			f.Value = v
		}
		f.Multiline = p.Type == hldp.TypeArray || p.Type == hldp.TypeObject
		out = append(out, f)
	}
	return out
}

// lookup returns the entry of name when it is on the session's surface;
// one off it does not exist for this visitor.
func (c *Console) lookup(s *session, name string) (*catalog.Snapshot, catalog.Entry, bool) {
	snap := c.store.Load()
	if snap == nil {
		return nil, catalog.Entry{}, false
	}
	e, ok := snap.Lookup(name)
	if !ok || !s.user.surface().AllowsEntry(e) {
		return snap, catalog.Entry{}, false
	}
	return snap, e, true
}

func (c *Console) toolPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.showTool(w, r, s, http.StatusOK, nil, nil)
}

// maxFileShown bounds the definition file a tool page shows.
const maxFileShown = 256 << 10

// formParams turns the form's values into params of the declared types:
// integer, number and boolean parsed, array and object as JSON; an empty
// optional field is left out. A value that does not parse goes through
// as text, so params validation says what was expected.
func formParams(t *hldp.Tool, form map[string][]string) (map[string]any, map[string]string) {
	params, sent := map[string]any{}, map[string]string{}
	for _, p := range t.Params {
		vals, ok := form["p."+p.Name]
		if !ok || len(vals) == 0 {
			continue
		}
		v := vals[0]
		sent[p.Name] = v
		if v == "" && !p.Required {
			continue
		}
		switch p.Type {
		case hldp.TypeInteger:
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				params[p.Name] = n
				continue
			}
		case hldp.TypeNumber:
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				params[p.Name] = f
				continue
			}
		case hldp.TypeBoolean:
			if b, err := strconv.ParseBool(v); err == nil {
				params[p.Name] = b
				continue
			}
		case hldp.TypeArray, hldp.TypeObject:
			var x any
			if json.Unmarshal([]byte(v), &x) == nil {
				params[p.Name] = x
				continue
			}
		}
		params[p.Name] = v
	}
	return params, sent
}

func (c *Console) callTool(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("name")
	_, e, ok := c.lookup(s, name)
	if !ok || e.Tool == nil {
		c.render(w, r, s, http.StatusNotFound, "error", map[string]any{"Message": fmt.Sprintf(c.t(r, s, "err.notool"), name)})
		return
	}
	dry := r.PostFormValue("action") != "run"
	if !dry && !s.user.CanCall {
		c.render(w, r, s, http.StatusForbidden, "error", map[string]any{"Message": c.t(r, s, "err.role")})
		return
	}
	params, sent := formParams(e.Tool, r.PostForm)
	raw, _ := json.Marshal(params)
	res := c.be.Invoke(r.Context(), dispatch.Call{Tool: name, Params: raw, Caller: s.user.Name, Door: DoorConsole, DryRun: dry, Surface: s.user.surface()})
	c.showTool(w, r, s, http.StatusOK, sent, &res)
}

// streamCall is try-a-call's Run for the page's script: the same call as
// callTool, answered as NDJSON while it runs: {"event":"stdout"|"stderr",
// "data"} chunks as the tool writes them, then {"event":"result","html"}
// with the result section as callTool's page shows it.
func (c *Console) streamCall(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("name")
	_, e, ok := c.lookup(s, name)
	if !ok || e.Tool == nil {
		http.Error(w, fmt.Sprintf(c.t(r, s, "err.notool"), name), http.StatusNotFound)
		return
	}
	if !s.user.CanCall {
		http.Error(w, c.t(r, s, "err.role"), http.StatusForbidden)
		return
	}
	params, _ := formParams(e.Tool, r.PostForm)
	raw, _ := json.Marshal(params)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var mu sync.Mutex
	send := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, err := w.Write(append(b, '\n')); err == nil {
			_ = rc.Flush()
		}
	}
	res := c.be.Invoke(r.Context(), dispatch.Call{Tool: name, Params: raw, Caller: s.user.Name, Door: DoorConsole, Surface: s.user.surface(),
		Output: func(stream string, p []byte) { send(map[string]string{"event": stream, "data": string(p)}) }})
	html, err := c.fragment(r, s, "tool", "result", map[string]any{"Result": &res, "ResultJSON": pretty(res)})
	if err != nil {
		c.log.Error("console: render the streamed result", "err", err)
	}
	send(map[string]string{"event": "result", "html": html})
}

// DoorConsole is the door of calls and decisions made in the console.
const DoorConsole = "console"

func (c *Console) approvalsPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.showApprovals(w, r, s, http.StatusOK, nil)
}

func (c *Console) showApprovals(w http.ResponseWriter, r *http.Request, s *session, code int, extra map[string]any) {
	pending, decided, err := c.approvalLists(s)
	if errors.Is(err, dispatch.ErrNoApprovals) {
		c.render(w, r, s, http.StatusOK, "error", map[string]any{"Message": c.t(r, s, "err.noqueue")})
		return
	}
	if err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, dispatch.ErrStoreUnavailable) {
			status = http.StatusServiceUnavailable // "approval store unavailable: " and the cause
		}
		c.render(w, r, s, status, "error", map[string]any{"Message": err.Error()})
		return
	}
	data := map[string]any{"Pending": pending, "Decided": decided}
	for k, v := range extra {
		data[k] = v
	}
	name := "approvals"
	if r.URL.Query().Get("fragment") == "pending" {
		name = "pending"
	}
	c.render(w, r, s, code, name, data)
}

// approvalEvents streams "changed" whenever the pending queue the session
// sees changes (server-sent events; the page's script then reloads the
// list). It looks every Poll, and ends with the request.
func (c *Console) approvalEvents(w http.ResponseWriter, r *http.Request, s *session) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": live approvals\n\n")
	fl.Flush()
	last := ""
	tick := time.NewTicker(c.opts.Poll)
	defer tick.Stop()
	for {
		pending, _, err := c.approvalLists(s)
		if err == nil {
			var ids []string
			for _, a := range pending {
				ids = append(ids, a.ID)
			}
			if key := strings.Join(ids, ","); key != last {
				if last != "" || len(ids) > 0 {
					fmt.Fprintf(w, "event: changed\ndata: %d\n\n", len(ids))
					fl.Flush()
				}
				last = key
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

func (c *Console) decide(w http.ResponseWriter, r *http.Request, s *session) {
	if !s.user.CanApprove {
		c.log.Info("console: decision refused: the session's role cannot approve", "user", s.user.Name)
		c.render(w, r, s, http.StatusForbidden, "error", map[string]any{"Message": c.t(r, s, "err.role")})
		return
	}
	id := r.PathValue("id")
	decision := r.PostFormValue("decision")
	if decision != "approve" && decision != "deny" {
		c.render(w, r, s, http.StatusBadRequest, "error", map[string]any{"Message": "decision: want approve or deny"})
		return
	}
	var edited json.RawMessage
	if e := strings.TrimSpace(r.PostFormValue("params")); decision == "approve" && e != "" {
		// Edits only when they differ from what was asked.
		if a, err := c.be.ApprovalOn(id, s.user.surface()); err == nil {
			asked, _ := json.Marshal(a.Params)
			var x any
			if json.Unmarshal([]byte(e), &x) != nil || !jsonEqual(asked, []byte(e)) {
				edited = json.RawMessage(e)
			}
		}
	}
	_, _, err := c.be.DecideOn(r.Context(), id, s.user.decider(), s.user.surface(), decision == "approve", edited)
	if err != nil {
		code := http.StatusConflict
		switch {
		case errors.Is(err, dispatch.ErrApprovalNotFound):
			code = http.StatusNotFound
		case errors.Is(err, dispatch.ErrSelfApproval):
			code = http.StatusForbidden
		case errors.Is(err, dispatch.ErrInvalidEdit):
			code = http.StatusUnprocessableEntity
		}
		msg := err.Error()
		if errors.Is(err, dispatch.ErrSelfApproval) && !s.user.Operator {
			msg = c.t(r, s, "err.own") + " (" + msg + ")"
		}
		c.showApprovals(w, r, s, code, map[string]any{"Error": msg})
		return
	}
	http.Redirect(w, r, "/ui/approvals#"+id, http.StatusSeeOther)
}

// pretty is v as indented JSON, with <, > and & as they are (the template
// escapes them for HTML).
func pretty(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return ""
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// runPage shows a recent call's result as it came, to its caller, or to
// an approver; a tool off the session's surface, or a result no longer
// kept, is not found.
func (c *Console) runPage(w http.ResponseWriter, r *http.Request, s *session) {
	notFound := func() {
		c.render(w, r, s, http.StatusNotFound, "error", map[string]any{"Message": c.t(r, s, "err.norun")})
	}
	if c.opts.Run == nil {
		notFound()
		return
	}
	caller, res, ok := c.opts.Run(r.PathValue("id"))
	if !ok || (!s.user.CanApprove && caller != s.user.Name) {
		notFound()
		return
	}
	if sf := s.user.surface(); len(sf) > 0 {
		var t *hldp.Tool
		if snap := c.store.Load(); snap != nil {
			if e, ok := snap.Lookup(res.Tool); ok {
				t = e.Tool
			}
		}
		if !sf.Allows(res.Tool, t) {
			notFound()
			return
		}
	}
	c.render(w, r, s, http.StatusOK, "run", map[string]any{"Result": &res, "Caller": caller, "ResultJSON": pretty(res)})
}
