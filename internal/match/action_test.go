package match

import "testing"

// TestActionDecidesFamily: in a deploy/rollback family, a request to roll
// back lowers the members whose title offers another action (deploy) and
// leaves the one that offers it as it was, and a request to deploy leaves
// the deploy tool as it was; the verdict (found) is the same with the
// check off (factor 1). The check is mild (offActionFactor): it decides
// near ties, and does not yet overturn a member that shares more of the
// request's other words ("roll back the build in the environment" still
// ranks svc-deploy first, at a smaller lead).
func TestActionDecidesFamily(t *testing.T) {
	docs := []Doc{
		{ID: "svc-deploy", Fields: []Field{{Name: "name", Text: "svc-deploy", Weight: 2.5}, {Name: "display", Text: "发布服务", Weight: 2.5}, {Name: "intent", Text: "Ship a chosen build of a service to an environment", Weight: 2}}},
		{ID: "svc-rollback", Fields: []Field{{Name: "name", Text: "svc-rollback", Weight: 2.5}, {Name: "display", Text: "回滚服务", Weight: 2.5}, {Name: "intent", Text: "把服务切回之前的稳定版本", Weight: 2}}},
		{ID: "disk-space", Fields: []Field{{Name: "display", Text: "磁盘空间", Weight: 2.5}, {Name: "intent", Text: "查看各挂载点的剩余空间", Weight: 2}}},
	}
	on := New(docs, nil)
	off := on.WithOffAction(1)
	score := func(r Result, id string) float64 {
		for _, c := range r.Candidates {
			if c.ID == id {
				return c.Score
			}
		}
		return 0
	}
	for _, c := range []struct {
		q, right, wrong string
	}{
		{"roll back the build in the environment", "svc-rollback", "svc-deploy"},
		{"把服务的 build 回滚", "svc-rollback", "svc-deploy"},
		{"deploy the service build", "svc-deploy", ""},
	} {
		a, b := on.Match(c.q, 3), off.Match(c.q, 3)
		if a.Found != b.Found {
			t.Errorf("Match(%q): found %v with the action check, %v without; want the same verdict", c.q, a.Found, b.Found)
		}
		if ra, rb := score(a, c.right), score(b, c.right); ra != rb || ra == 0 {
			t.Errorf("Match(%q): %s scores %.3f with the check, %.3f without; want the same, above 0", c.q, c.right, ra, rb)
		}
		if c.wrong != "" {
			if wa, wb := score(a, c.wrong), score(b, c.wrong); !(wa < wb) {
				t.Errorf("Match(%q): %s (another action) scores %.3f with the check, %.3f without; want lower", c.q, c.wrong, wa, wb)
			}
		}
	}
	if r := on.Match("把服务的 build 回滚", 3); r.Candidates[0].ID != "svc-rollback" {
		t.Errorf("Match(把服务的 build 回滚) = %+v; want svc-rollback first", r.Candidates)
	}
}
