package console

import (
	"net/http"
	"strconv"
	"time"

	"github.com/toolagent/toolagent/internal/catalog"
)

func (c *Console) statusPage(w http.ResponseWriter, r *http.Request, s *session) {
	data := map[string]any{"Version": c.opts.Version, "Sandbox": c.opts.Sandbox, "CanSync": c.opts.Sync != nil && s.user.Operator,
		"Synced": r.URL.Query().Get("synced")}
	if c.opts.Status != nil {
		data["Status"] = c.opts.Status()
	}
	if c.opts.Facts != nil {
		data["Facts"] = c.opts.Facts(r.Context())
	}
	if snap := c.store.Load(); snap != nil {
		counts := snap.Counts()
		data["Counts"] = []Fact{{Name: "enabled", Value: strconv.Itoa(counts[catalog.Enabled])}, {Name: "stale", Value: strconv.Itoa(counts[catalog.Stale]), Bad: counts[catalog.Stale] > 0},
			{Name: "failed", Value: strconv.Itoa(counts[catalog.Failed]), Bad: counts[catalog.Failed] > 0}, {Name: "disabled", Value: strconv.Itoa(counts[catalog.Disabled])},
			{Name: "untrusted", Value: strconv.Itoa(counts[catalog.Untrusted]), Bad: counts[catalog.Untrusted] > 0}}
		// The reload's problems, file:line, of the tools this session sees.
		var problems []string
		for _, e := range s.user.surface().Filter(snap.All()) {
			if e.LoadErr != nil {
				problems = append(problems, e.LoadErr.Error())
			}
		}
		data["Problems"] = problems
	}
	if c.opts.Executors != nil {
		data["Executors"] = c.opts.Executors()
	}
	if c.opts.LastWebhook != nil {
		if at, result := c.opts.LastWebhook(); !at.IsZero() {
			data["Webhook"] = localTime(at) + ": " + result
		} else {
			data["Webhook"] = "—"
		}
	}
	c.render(w, r, s, http.StatusOK, "status", data)
}

// syncWait bounds how long "Sync now" waits for the sync it asked for
// before showing the status page (which then shows it as running).
const syncWait = 15 * time.Second

// syncNow is the status page's "Sync now" (the operator's): it asks the
// reload loop for a sync, waits until the loop reports an attempt that
// ended after the ask (or syncWait passes), and shows the status page.
func (c *Console) syncNow(w http.ResponseWriter, r *http.Request, s *session) {
	if c.opts.Sync == nil || !s.user.Operator {
		c.log.Info("console: sync refused: not the operator", "user", s.user.Name)
		c.render(w, r, s, http.StatusForbidden, "error", map[string]any{"Message": c.t(r, s, "err.operator")})
		return
	}
	asked := time.Now()
	c.opts.Sync()
	c.log.Info("console: sync asked", "user", s.user.Name)
	done := "asked"
	if c.opts.Status != nil {
		deadline := time.NewTimer(syncWait)
		defer deadline.Stop()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
	wait:
		for {
			st := c.opts.Status()
			if st.LastOK.After(asked) || st.LastErrAt.After(asked) {
				done = "done"
				break
			}
			select {
			case <-r.Context().Done():
				return
			case <-deadline.C:
				break wait
			case <-tick.C:
			}
		}
	}
	http.Redirect(w, r, "/ui/status?synced="+done, http.StatusSeeOther)
}
