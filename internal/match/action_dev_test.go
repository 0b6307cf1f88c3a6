package match_test

import (
	"testing"

	"github.com/toolagent/toolagent/internal/match"
)

// TestDevSetActionDecides: in the development set's catalog, whose deploy
// tool's description shares more of these requests' other words than its
// rollback tool's, the action picks the rollback tool (and the deploy one
// for a request to deploy), in both languages; a request to close an
// issue reaches the tool that closes issues.
func TestDevSetActionDecides(t *testing.T) {
	docs, _ := devSet(t)
	ix := match.New(docs, nil)
	for _, c := range []struct{ q, want string }{
		{"revert the production build", "app-rollback"},
		{"回滚生产环境的构建", "app-rollback"},
		{"把生产环境的构建回退到上一版", "app-rollback"},
		{"undo the production release of billing", "app-rollback"},
		{"revert the last deploy of api-gateway, it broke auth", "app-rollback"},
		{"deploy build 1.4.2 of billing to production", "app-deploy"},
		{"把 billing 的 1.4.2 构建发布到生产环境", "app-deploy"},
		// "resolve" named both closing an issue and a DNS lookup, so
		// dns-resolve's title offered to close.
		{"close issue 88 in infra", "issue-update"},
		{"把 infra 仓库的 88 号 issue 关掉", "issue-update"},
	} {
		r := ix.Match(c.q, 3)
		if len(r.Candidates) == 0 || r.Candidates[0].ID != c.want {
			t.Errorf("Match(%q) = %+v; want %s first", c.q, r.Candidates, c.want)
		}
	}
}
