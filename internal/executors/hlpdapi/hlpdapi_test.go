package hlpdapi_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolagent/toolagent/internal/executors"
	"github.com/toolagent/toolagent/internal/executors/hlpdapi"
	"github.com/toolagent/toolagent/internal/hldp"
)

const secret = "Bearer top-secret-api-key"

// seen is one request the test API received.
type seen struct {
	Method, Path, RawPath, Query, Body, Auth, ContentType string
}

// api is an httptest server that records requests and answers by path.
type api struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newAPI(t *testing.T, handle http.HandlerFunc) *api {
	t.Helper()
	a := &api{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.reqs = append(a.reqs, seen{r.Method, r.URL.Path, r.URL.RawPath, r.URL.RawQuery, string(b), r.Header.Get("Authorization"), r.Header.Get("Content-Type")})
		a.mu.Unlock()
		handle(w, r)
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *api) last() seen {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.reqs) == 0 {
		return seen{}
	}
	return a.reqs[len(a.reqs)-1]
}

func example(t *testing.T, name string) *hldp.Tool {
	t.Helper()
	file := filepath.Join("..", "..", "..", "examples", "hlpd-api", "tools", name, hldp.FileName)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tool, err := hldp.Parse(file, data)
	if err != nil {
		t.Fatalf("Parse(%s) = %v", file, err)
	}
	return tool
}

func newExec(t *testing.T, base string, logs io.Writer) *hlpdapi.Executor {
	t.Helper()
	var log *slog.Logger
	if logs != nil {
		log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ex, err := hlpdapi.New(hlpdapi.Options{
		BaseURL: base + "/api/",
		Header:  map[string]string{"Authorization": secret},
		Routes: map[string]hlpdapi.Route{
			"items.get":    {Verb: "GET", Path: "/v1/items/{id}"},
			"items.delete": {Verb: "delete", Path: "/v1/items/{id}"},
			"items.patch":  {Verb: "PATCH", Path: "/v1/items/{id}/meta"},
		},
		Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

func run(t *testing.T, ex *hlpdapi.Executor, tool *hldp.Tool, params map[string]any) (executors.Outcome, error) {
	t.Helper()
	p, err := tool.CheckParams(params)
	if err != nil {
		t.Fatalf("CheckParams(%v) = %v", params, err)
	}
	return ex.Execute(t.Context(), executors.Request{Tool: tool, Params: p, Rev: "r1"})
}

// tool builds a tool literal for methods without an example file.
func tool(method string, params ...hldp.Param) *hldp.Tool {
	return &hldp.Tool{Name: "t-" + strings.ReplaceAll(method, ".", "-"), Method: method, Executor: hldp.HlpdAPI, Params: params,
		Constraints: hldp.Constraints{Timeout: 5 * time.Second, MaxOutputBytes: 1 << 16}}
}

func TestRequestMapping(t *testing.T) {
	a := newAPI(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	})
	ex := newExec(t, a.URL, nil)
	str := hldp.Param{Name: "id", Type: hldp.TypeString, Required: true}
	tests := []struct {
		name   string
		tool   *hldp.Tool
		params map[string]any
		want   seen
	}{
		{
			name:   "configured GET: path filled and escaped, rest in query",
			tool:   example(t, "item-get"),
			params: map[string]any{"id": "a_b-1", "fields": []any{"name", "size"}},
			want:   seen{Method: "GET", Path: "/api/v1/items/a_b-1", Query: "fields=name&fields=size", Auth: secret},
		},
		{
			name:   "default route: POST /{method} with a JSON body",
			tool:   example(t, "item-create"),
			params: map[string]any{"title": "新条目 & more", "tags": []any{"x"}},
			want:   seen{Method: "POST", Path: "/api/items.create", Body: `{"tags":["x"],"title":"新条目 & more"}`, Auth: secret, ContentType: "application/json"},
		},
		{
			name:   "DELETE: query, no body",
			tool:   tool("items.delete", str, hldp.Param{Name: "force", Type: hldp.TypeBoolean}),
			params: map[string]any{"id": "a/b c", "force": true},
			want:   seen{Method: "DELETE", Path: "/api/v1/items/a/b c", RawPath: "/api/v1/items/a%2Fb%20c", Query: "force=true", Auth: secret},
		},
		{
			name:   "PATCH: placeholder removed from the body",
			tool:   tool("items.patch", str, hldp.Param{Name: "n", Type: hldp.TypeInteger}),
			params: map[string]any{"id": "7", "n": 3},
			want:   seen{Method: "PATCH", Path: "/api/v1/items/7/meta", Body: `{"n":3}`, Auth: secret, ContentType: "application/json"},
		},
		{
			name:   "default route without params: empty object body",
			tool:   tool("ping"),
			params: map[string]any{},
			want:   seen{Method: "POST", Path: "/api/ping", Body: `{}`, Auth: secret, ContentType: "application/json"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := ex.Check(tt.tool); err != nil {
				t.Fatalf("Check() = %v", err)
			}
			out, err := run(t, ex, tt.tool, tt.params)
			if err != nil {
				t.Fatalf("Execute() = %v", err)
			}
			if diff := cmp.Diff(tt.want, a.last()); diff != "" {
				t.Errorf("request mismatch (-want +got):\n%s", diff)
			}
			if out.HTTPStatus != 200 || string(out.Output) != `{"ok":true}` || len(out.Stderr) != 0 {
				t.Errorf("Execute() = status %d, output %q, stderr %q", out.HTTPStatus, out.Output, out.Stderr)
			}
		})
	}
}

func TestStatusBodiesKept(t *testing.T) {
	a := newAPI(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/items/missing":
			http.Error(w, `{"error":"no item missing"}`, http.StatusNotFound)
		default:
			http.Error(w, "database is down", http.StatusInternalServerError)
		}
	})
	var logs bytes.Buffer
	ex := newExec(t, a.URL, &logs)
	tests := []struct {
		id         string
		wantStatus int
		wantBody   string
	}{
		{id: "missing", wantStatus: 404, wantBody: `{"error":"no item missing"}`},
		{id: "other", wantStatus: 500, wantBody: "database is down"},
	}
	for _, tt := range tests {
		out, err := run(t, ex, example(t, "item-get"), map[string]any{"id": tt.id})
		if err != nil {
			t.Fatalf("Execute(%s) = %v, want an outcome", tt.id, err)
		}
		if out.HTTPStatus != tt.wantStatus || strings.TrimSpace(string(out.Output)) != tt.wantBody || !strings.Contains(string(out.Stderr), "HTTP "+strconv.Itoa(tt.wantStatus)) {
			t.Errorf("Execute(%s) = status %d, output %q, stderr %q; want %d, %q", tt.id, out.HTTPStatus, out.Output, out.Stderr, tt.wantStatus, tt.wantBody)
		}
	}
	if strings.Contains(logs.String(), "top-secret") {
		t.Errorf("log holds the auth header:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "hlpd-api call") {
		t.Errorf("no debug line per call:\n%s", logs.String())
	}
}

func TestTimeoutAndCap(t *testing.T) {
	release := make(chan struct{})
	a := newAPI(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/api/big":
			io.WriteString(w, strings.Repeat("x", 5000))
		}
	})
	defer close(release)
	ex := newExec(t, a.URL, nil)

	slow := tool("slow")
	slow.Constraints.Timeout = 200 * time.Millisecond
	out, err := run(t, ex, slow, nil)
	if err != nil || !out.TimedOut {
		t.Errorf("Execute(slow) = TimedOut %v, %v; want true, nil", out.TimedOut, err)
	}

	big := tool("big")
	big.Constraints.MaxOutputBytes = 100
	out, err = run(t, ex, big, nil)
	if err != nil || len(out.Output) != 100 || !out.Truncated || out.OutputBytes != 5000 {
		t.Errorf("Execute(big) = %d bytes, Truncated %v, OutputBytes %d, %v; want 100, true, 5000", len(out.Output), out.Truncated, out.OutputBytes, err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := ex.Execute(ctx, executors.Request{Tool: tool("big"), Params: map[string]any{}}); !errors.Is(err, context.Canceled) {
		t.Errorf("Execute(cancelled ctx) = %v, want context.Canceled", err)
	}
}

func TestUnreachableAndHealth(t *testing.T) {
	a := newAPI(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != secret {
			http.Error(w, "no auth", http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/api/healthz" {
			io.WriteString(w, "ok")
			return
		}
		http.NotFound(w, r)
	})
	ex := newExec(t, a.URL, nil)
	if err := ex.Health(t.Context()); err != nil {
		t.Errorf("Health() = %v", err)
	}
	custom, err := hlpdapi.New(hlpdapi.Options{BaseURL: a.URL + "/api", HealthPath: "/status"})
	if err != nil {
		t.Fatal(err)
	}
	if err := custom.Health(t.Context()); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "/api/status") {
		t.Errorf("Health(no auth, /status) = %v, want HTTP 401 naming /api/status", err)
	}

	a.Close()
	if err := ex.Health(t.Context()); !errors.Is(err, hlpdapi.ErrUnreachable) {
		t.Errorf("Health(closed) = %v, want ErrUnreachable", err)
	}
	_, err = run(t, ex, example(t, "item-get"), map[string]any{"id": "x"})
	if !errors.Is(err, hlpdapi.ErrUnreachable) || strings.Contains(err.Error(), "top-secret") {
		t.Errorf("Execute(closed) = %v, want ErrUnreachable without the header", err)
	}
}

func TestConfig(t *testing.T) {
	ex, err := hlpdapi.New(hlpdapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.Health(t.Context()); !errors.Is(err, executors.ErrNotConfigured) {
		t.Errorf("Health(no base URL) = %v, want ErrNotConfigured", err)
	}
	if err := ex.Check(example(t, "item-get")); !errors.Is(err, executors.ErrNotConfigured) {
		t.Errorf("Check(no base URL) = %v, want ErrNotConfigured", err)
	}
	bad := []hlpdapi.Options{
		{BaseURL: "ftp://x"},
		{BaseURL: "http://x/?a=1"},
		{BaseURL: "http://x", Routes: map[string]hlpdapi.Route{"m": {Verb: "FETCH", Path: "/x"}}},
		{BaseURL: "http://x", Routes: map[string]hlpdapi.Route{"m": {Verb: "GET", Path: "x"}}},
		{BaseURL: "http://x", Routes: map[string]hlpdapi.Route{"m": {Verb: "GET", Path: "/x/{a-b}"}}},
		{BaseURL: "http://x", Routes: map[string]hlpdapi.Route{"m": {Verb: "GET", Path: "/x/{a"}}},
		{BaseURL: "http://x", Header: map[string]string{"Bad Name": "v"}},
		{BaseURL: "http://x", Header: map[string]string{"X-Key": "v\r\nInjected: 1"}},
	}
	for _, o := range bad {
		if _, err := hlpdapi.New(o); err == nil {
			t.Errorf("New(%+v) = nil error, want a configuration error", o.Routes)
		} else if strings.Contains(err.Error(), "Injected") {
			t.Errorf("New error %q holds the header value", err)
		}
	}
	ex, err = hlpdapi.New(hlpdapi.Options{BaseURL: "http://x", Routes: map[string]hlpdapi.Route{"m": {Verb: "GET", Path: "/x/{undeclared}"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.Check(tool("m")); err == nil || !strings.Contains(err.Error(), "undeclared") {
		t.Errorf("Check(route with an undeclared placeholder) = %v", err)
	}
	plan, err := newExec(t, "http://h", nil).Plan(executors.Request{Tool: example(t, "item-get"), Params: map[string]any{"id": "9"}})
	if err != nil || plan.Extra["url"] != "http://h/api/v1/items/9" || plan.Extra["http"] != "GET" || plan.Extra["headers"] != "Authorization" {
		t.Errorf("Plan() = %+v, %v", plan, err)
	}
}
