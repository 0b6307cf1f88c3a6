package health

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/robfig/cron/v3"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/hldp"
)

// fakeHealth is a health probe whose answer the test sets.
type fakeHealth struct {
	mu  sync.Mutex
	err error
}

func (f *fakeHealth) Health(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *fakeHealth) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// TestHealthNarrow checks the verdicts: which tools a failed check
// fails or disables, and that only changes report a change.
func TestHealthNarrow(t *testing.T) {
	gkA, gkB, hlpd := &fakeHealth{}, &fakeHealth{}, &fakeHealth{}
	sched, _ := cron.ParseStandard("@every 1h")
	h := New(Options{Probes: []Probe{{hldp.Gatekeeper, "a", gkA}, {hldp.Gatekeeper, "b", gkB}, {hldp.HlpdAPI, "", hlpd}}, GatekeeperDefault: "a", Schedule: sched, Timeout: time.Second})
	allEnabled := func(*hldp.Tool) (catalog.Status, string) { return catalog.Enabled, "" }
	check := h.Narrow(allEnabled)
	tools := map[string]*hldp.Tool{
		"default-target": {Executor: hldp.Gatekeeper},
		"on-a":           {Executor: hldp.Gatekeeper, Ext: &hldp.Ext{Target: "a"}},
		"on-b":           {Executor: hldp.Gatekeeper, Ext: &hldp.Ext{Target: "b"}},
		"hlpd":           {Executor: hldp.HlpdAPI},
		"shell":          {Executor: hldp.Shell},
	}
	statuses := func() map[string]string {
		out := map[string]string{}
		for name, tl := range tools {
			st, _ := check(tl)
			out[name] = st.String()
		}
		return out
	}
	steps := []struct {
		name        string
		a, b, hl    error
		wantChanged bool
		want        map[string]string
	}{
		{"all healthy", nil, nil, nil, false, map[string]string{"default-target": "enabled", "on-a": "enabled", "on-b": "enabled", "hlpd": "enabled", "shell": "enabled"}},
		{"a down", errors.New("gatekeeper target a: unreachable"), nil, nil, true, map[string]string{"default-target": "failed", "on-a": "failed", "on-b": "enabled", "hlpd": "enabled", "shell": "enabled"}},
		{"a still down", errors.New("gatekeeper target a: unreachable"), nil, nil, false, map[string]string{"default-target": "failed", "on-a": "failed", "on-b": "enabled", "hlpd": "enabled", "shell": "enabled"}},
		{"a back, hlpd not configured", nil, nil, fmt.Errorf("hlpd-api base URL %w", executors.ErrNotConfigured), true, map[string]string{"default-target": "enabled", "on-a": "enabled", "on-b": "enabled", "hlpd": "disabled", "shell": "enabled"}},
	}
	for _, s := range steps {
		gkA.set(s.a)
		gkB.set(s.b)
		hlpd.set(s.hl)
		if changed := h.Check(t.Context()); changed != s.wantChanged {
			t.Errorf("%s: check() = %v; want %v", s.name, changed, s.wantChanged)
		}
		if diff := cmp.Diff(s.want, statuses()); diff != "" {
			t.Errorf("%s: statuses mismatch (-want +got):\n%s", s.name, diff)
		}
	}
	// A tool the base checker already disabled keeps its own reason.
	if st, reason := h.Narrow(func(*hldp.Tool) (catalog.Status, string) { return catalog.Disabled, "no" })(tools["hlpd"]); st != catalog.Disabled || reason != "no" {
		t.Errorf("narrow(base disabled) = %s %q; want the base's verdict", st, reason)
	}
}
