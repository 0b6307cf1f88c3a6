// A package for TestRealGoTest: one test of each outcome, as the go
// command reports them with -json.
package mod

import "testing"

func TestPass(t *testing.T) { t.Log("a passing test's log is not printed") }

func TestSkip(t *testing.T) {
	t.Log("checking the environment")
	t.Skip("needs TOOLAGENT_EXAMPLE_URL")
}

func TestFail(t *testing.T) {
	t.Run("ok", func(t *testing.T) {})
	t.Run("bad", func(t *testing.T) { t.Error("want 1, got 2") })
}
