package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type probeParams struct {
	mcp.ParamsBase
	Say string `json:"say"`
}

type probeResult struct {
	mcp.ResultBase
	Said string `json:"said"`
}

// TestExtensions: an extension given in Options is declared under
// capabilities.extensions by server/discover, and its methods answer only
// clients that declare it too; the others get
// MissingRequiredClientCapabilityError (-32021, HTTP 400) naming it.
func TestExtensions(t *testing.T) {
	const id = "example.com/probe"
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			f := newFixture(t, Options{Extensions: []Extension{{ID: id, Settings: map[string]any{"level": 2}, Methods: []string{"probe/echo"}}}})
			err := mcp.AddReceivingCustomMethod(f.srv.MCP(), "probe/echo", func(_ context.Context, _ *mcp.ServerSession, p *probeParams) (*probeResult, error) {
				return &probeResult{Said: p.Say}, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(f.srv.HTTPHandler(&mcp.StreamableHTTPOptions{Stateless: era.stateless}))
			defer ts.Close()

			_, _, disc := post(t, ts.URL, "server/discover", map[string]any{"_meta": modernMeta(nil)}, nil)
			var res struct {
				Capabilities struct {
					Extensions map[string]json.RawMessage `json:"extensions"`
				} `json:"capabilities"`
			}
			if err := json.Unmarshal(disc.Result, &res); err != nil || string(res.Capabilities.Extensions[id]) != `{"level":2}` {
				t.Errorf("server/discover capabilities.extensions = %v (%v), want %s with its settings", res.Capabilities.Extensions, err, id)
			}

			status, _, resp := post(t, ts.URL, "probe/echo", map[string]any{"say": "hi", "_meta": modernMeta(nil)}, nil)
			if status != http.StatusBadRequest || resp.Error == nil || resp.Error.Code != mcp.CodeMissingRequiredClientCapabilities {
				t.Fatalf("probe/echo from a client without the extension: HTTP %d, error %+v; want 400 and -32021", status, resp.Error)
			}
			var data struct {
				RequiredCapabilities struct {
					Extensions map[string]json.RawMessage `json:"extensions"`
				} `json:"requiredCapabilities"`
			}
			if err := json.Unmarshal(resp.Error.Data, &data); err != nil || data.RequiredCapabilities.Extensions[id] == nil {
				t.Errorf("-32021 data = %s (%v), want requiredCapabilities.extensions naming %s", resp.Error.Data, err, id)
			}
			if !strings.Contains(resp.Error.Message, id) {
				t.Errorf("-32021 message %q does not name the extension", resp.Error.Message)
			}

			declaring := modernMeta(map[string]any{"extensions": map[string]any{id: map[string]any{}}})
			status, _, resp = post(t, ts.URL, "probe/echo", map[string]any{"say": "hi", "_meta": declaring}, nil)
			if status != http.StatusOK || resp.Error != nil || !strings.Contains(string(resp.Result), `"said":"hi"`) {
				t.Errorf("probe/echo from a client with the extension: HTTP %d, error %+v, result %s; want 200 and said hi", status, resp.Error, resp.Result)
			}
		})
	}
}

// TestExtensionsMisconfigured: an extension without an ID, or two of one
// ID, is a wiring bug New refuses.
func TestExtensionsMisconfigured(t *testing.T) {
	for name, exts := range map[string][]Extension{
		"no ID": {{Methods: []string{"x/y"}}},
		"twice": {{ID: "example.com/a"}, {ID: "example.com/a"}},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("New with extensions %+v did not panic", exts)
				}
			}()
			newFixture(t, Options{Extensions: exts})
		})
	}
}
