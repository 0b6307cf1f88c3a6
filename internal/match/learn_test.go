package match

import "testing"

// TestLearnedAfterWrongTopThree: a request whose tool was not among the
// three candidates, learned for the tool the caller then called, teaches
// the tool the request's words, so that another request in those words
// (not the same one) finds it first; the learned words weigh nothing for
// the other tools, and a request that only shares a generic word with
// the learned one is refused as before.
func TestLearnedAfterWrongTopThree(t *testing.T) {
	docs := []Doc{
		{ID: "svc-restart", Fields: []Field{{Name: "intent", Text: "Stop and start a systemd service again", Weight: 2}}},
		{ID: "svc-status", Fields: []Field{{Name: "intent", Text: "Tell whether a systemd service is active", Weight: 2}}},
		{ID: "svc-reload", Fields: []Field{{Name: "intent", Text: "Make a service re-read its configuration", Weight: 2}}},
		{ID: "svc-logs", Fields: []Field{{Name: "intent", Text: "Show the journal output of a service", Weight: 2}}},
		{ID: "ledger-export", Fields: []Field{{Name: "intent", Text: "Export the payments ledger of a day as CSV", Weight: 2}}},
	}
	asked := "the payments worker is wedged, give it a kick"
	again := "kick the wedged billing worker"
	before := New(docs, nil)
	in3 := func(r Result, id string) bool {
		for _, c := range r.Candidates {
			if c.ID == id {
				return true
			}
		}
		return false
	}
	if r := before.Match(asked, 3); in3(r, "svc-restart") && r.Found {
		t.Fatalf("before learning Match(%q) = %+v; the test needs svc-restart missing from the top three", asked, r)
	}
	taught := append([]Doc(nil), docs...)
	taught[0] = Doc{ID: "svc-restart", Fields: append(append([]Field(nil), docs[0].Fields...), Field{Name: "learned", Text: asked, Weight: 1, Learned: true})}
	after := New(taught, nil)
	r := after.Match(again, 3)
	if len(r.Candidates) == 0 || r.Candidates[0].ID != "svc-restart" {
		t.Errorf("after learning Match(%q) = %+v; want svc-restart first", again, r)
	}
	if r := after.Match(asked, 3); !r.Found || r.Candidates[0].ID != "svc-restart" {
		t.Errorf("after learning Match(%q) = %+v; want svc-restart found first", asked, r)
	}
	for _, q := range []string{"write a poem about the payments team", "what is the weather"} {
		b, a := before.Match(q, 3), after.Match(q, 3)
		if a.Found && !b.Found {
			t.Errorf("learning turned the refusal of %q into %+v", q, a)
		}
	}
	// The index keeps learned words apart: the status tool scores the
	// same on its own words.
	q := "is the systemd service active"
	if b, a := before.Match(q, 3), after.Match(q, 3); b.Candidates[0].ID != a.Candidates[0].ID || b.Candidates[0].Score != a.Candidates[0].Score {
		t.Errorf("Match(%q): before %+v, after %+v; want the same best candidate", q, b.Candidates[0], a.Candidates[0])
	}
}
