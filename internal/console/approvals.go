package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/toolagent/toolagent/internal/dispatch"
)

// approvalView is one approval as the inbox shows it.
type approvalView struct {
	dispatch.Approval
	// Params are the params as asked, each value as written (a string as
	// it is: a command reads as the command).
	Params     []paramValue
	ParamsJSON string
	Changes    []change
	Pending    bool
	// Count is how many pending requests ask for this same call (tool,
	// revision, params, caller); the inbox shows them once.
	Count int
	// Own: the session's operator asked for this call; the page offers
	// "Confirm and run" (the call as asked) instead of Approve.
	Own bool
	// MayApprove: the approval rules let the session approve (or, Own,
	// confirm) it; NotWhy says why not. MayDeny: the session may deny it
	// (or withdraw its own).
	MayApprove, MayDeny bool
	NotWhy              string
	// Command is the argv the call will run (a run-method tool's template
	// filled with the params, each word quoted as a shell would need),
	// when the definition served is the one asked for.
	Command string
	// The decided call's result, in brief.
	ResultStatus string
	ExitCode     string
	RunID        string
}

// paramValue is one param of a request.
type paramValue struct {
	Name, Value string
	// Long values are shown as a block.
	Long bool
}

func paramValues(m map[string]any) []paramValue {
	var out []paramValue
	for _, k := range slices.Sorted(mapsKeys(m)) {
		v := ""
		if s, ok := m[k].(string); ok {
			v = s
		} else {
			v = compactJSON(m[k])
		}
		out = append(out, paramValue{Name: k, Value: v, Long: len(v) > 60 || bytes.ContainsRune([]byte(v), '\n')})
	}
	return out
}

// change is one param an approver edited: asked vs approved.
type change struct{ Name, Asked, Approved string }

func diffParams(asked, edited map[string]any) []change {
	if edited == nil {
		return nil
	}
	names := map[string]bool{}
	for k := range asked {
		names[k] = true
	}
	for k := range edited {
		names[k] = true
	}
	var out []change
	for _, k := range slices.Sorted(mapsKeys(names)) {
		a, _ := json.Marshal(asked[k])
		b, _ := json.Marshal(edited[k])
		if !bytes.Equal(a, b) {
			_, inA := asked[k]
			_, inB := edited[k]
			ch := change{Name: k, Asked: string(a), Approved: string(b)}
			if !inA {
				ch.Asked = "—"
			}
			if !inB {
				ch.Approved = "—"
			}
			out = append(out, ch)
		}
	}
	return out
}

// view is a as session s sees it: which buttons it may use is the
// approval rules' answer (Backend.MayApprove), not the page's.
func (c *Console) view(a dispatch.Approval, s *session) approvalView {
	u := s.user
	v := approvalView{Approval: a, Pending: a.Status == "pending", Own: u.owns(a), Count: 1}
	v.Params = paramValues(a.Params)
	if v.Pending {
		v.ParamsJSON = pretty(a.Params)
		v.Command = c.command(a)
		if u.CanApprove {
			v.MayDeny = true
			if err := c.be.MayApprove(a, u.decider()); err != nil {
				v.NotWhy = err.Error()
			} else {
				v.MayApprove = true
			}
		}
	}
	if a.EditedParams != nil {
		v.Changes = diffParams(a.Params, a.EditedParams)
	}
	if len(a.Result) > 0 {
		var res dispatch.Result
		if json.Unmarshal(a.Result, &res) == nil {
			v.ResultStatus, v.ExitCode, v.RunID = string(res.Status), fmt.Sprint(res.ExitCode), res.RunID
		}
	}
	return v
}

// command is the argv a's call will run, quoted for reading, or "" when
// the tool has no argv template or its served definition is not the one
// asked for.
func (c *Console) command(a dispatch.Approval) string {
	snap := c.store.Load()
	if snap == nil {
		return ""
	}
	e, ok := snap.Lookup(a.Tool)
	if !ok || e.Tool == nil || e.Rev != a.Revision || len(e.Tool.Argv) == 0 {
		return ""
	}
	argv, err := e.Tool.RenderArgv(a.RunParams())
	if err != nil {
		return ""
	}
	words := make([]string, len(argv))
	for i, w := range argv {
		words[i] = shellQuote(w)
	}
	return strings.Join(words, " ")
}

// plainWord is a word a shell reads as it is.
var plainWord = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellQuote is w as a shell (bash) would need it written to mean one
// word: as it is when plain, in single quotes, or, when it holds a
// control character (a newline), in $'…' with the character escaped, so
// that what the approver reads is every byte. It is for reading: the call
// runs argv directly, never through a shell.
func shellQuote(w string) string {
	if plainWord.MatchString(w) {
		return w
	}
	if !strings.ContainsFunc(w, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for _, r := range w {
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// maxDecided is how many decided requests the inbox lists.
const maxDecided = 50

func (c *Console) approvalLists(s *session) (pending, decided []approvalView, err error) {
	list, err := c.be.ApprovalsOn(false, s.user.surface())
	if err != nil {
		return nil, nil, err
	}
	same := map[string]int{} // the same call asked again: index in pending
	for _, a := range list {
		if !s.user.CanApprove && a.Caller != s.user.Name {
			continue // a caller sees its own calls only, as at the API
		}
		if a.Status != "pending" {
			decided = append(decided, c.view(a, s))
			continue
		}
		key := a.Tool + "\x00" + a.Revision + "\x00" + a.ParamsHash + "\x00" + a.Caller // as approval.Request.holdKey: doors do not count
		if i, ok := same[key]; ok {
			pending[i].Count++
			continue
		}
		same[key] = len(pending)
		pending = append(pending, c.view(a, s))
	}
	slices.Reverse(decided) // newest first
	if len(decided) > maxDecided {
		decided = decided[:maxDecided]
	}
	return pending, decided, nil
}

// approvalPage shows one approval, decided or not, with its result when
// its call ran: what a decided line of the inbox links to.
func (c *Console) approvalPage(w http.ResponseWriter, r *http.Request, s *session) {
	a, err := c.be.ApprovalOn(r.PathValue("id"), s.user.surface())
	if err != nil || (!s.user.CanApprove && a.Caller != s.user.Name) {
		c.render(w, r, s, http.StatusNotFound, "error", map[string]any{"Message": c.t(r, s, "err.noapproval")})
		return
	}
	data := map[string]any{"A": c.view(a, s)}
	if len(a.Result) > 0 {
		var res dispatch.Result
		if json.Unmarshal(a.Result, &res) == nil {
			data["Result"], data["ResultJSON"] = &res, pretty(json.RawMessage(a.Result))
		}
	}
	c.render(w, r, s, http.StatusOK, "approval", data)
}
