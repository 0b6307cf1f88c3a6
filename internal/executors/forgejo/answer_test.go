package forgejo

import (
	"strings"
	"testing"
)

// TestReason: the reason of an error answer, from each error shape Gitea
// and Forgejo send, and from bodies of other shapes.
func TestReason(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"message", 422, `{"message":"repository file already exists [path: README.md]","url":"http://localhost:3000/api/swagger"}` + "\n",
			"repository file already exists [path: README.md]"},
		{"errors after a handler name", 404, `{"errors":["object does not exist [id: , rel_path: x.md]"],"message":"GetContentsOrList","url":"u"}`,
			"GetContentsOrList: object does not exist [id: , rel_path: x.md]"},
		{"errors null", 404, `{"errors":null,"message":"The target couldn't be found.","url":"u"}`,
			"The target couldn't be found."},
		{"errors without a message", 422, `{"errors":["a","b"]}`, "a; b"},
		{"binding errors", 422, `[{"fieldNames":["Title"],"classification":"RequiredError","message":"Required"}]`, "Title: Required"},
		{"errors of another shape", 422, `{"errors":[{"code":7}],"message":"Invalid"}`, `Invalid: {"code":7}`},
		{"empty message of a 500", 500, `{"message":"","url":"u"}`,
			"the server sent no message (Gitea and Forgejo hide the reason of a 500 from tokens that are not an admin's; the server's log has it)"},
		{"empty message of a 403", 403, `{"message":"","url":"u"}`, "the server sent no message"},
		{"plain text", 404, "404 page not found\n", "404 page not found"},
		{"html", 502, "<html>\n<head><title>502 Bad Gateway</title></head>\n</html>", "<html>"},
		{"empty", 503, "", "empty body"},
		{"cut JSON", 422, `{"message":"repository file alre`, `{"message":"repository file alre`},
		{"other JSON", 400, `{"error":"bad"}`, `{"error":"bad"}`},
		{"long line", 500, strings.Repeat("x", 300), "a body of 300 bytes that is not an API error (the output holds it)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := answer{status: tt.status, body: []byte(tt.body), n: int64(len(tt.body))}
			if got := a.reason(); got != tt.want {
				t.Errorf("reason(%d %q) = %q, want %q", tt.status, tt.body, got, tt.want)
			}
		})
	}
}
