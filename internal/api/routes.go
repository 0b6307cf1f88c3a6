package api

import "net/http"

// route is one endpoint of the API. Every route the daemon serves is in
// routes, and api/openapi.yaml documents exactly these (a test checks
// both ways, including each route's role as x-toolagent-role).
type route struct {
	method  string
	path    string // a net/http ServeMux pattern path
	role    Role   // the least role a token needs; rolePublic: none
	handler http.HandlerFunc
}

func (s *server) routes() []route {
	return []route{
		{"GET", "/", rolePublic, s.handleIndex}, // exactly /: the index of these routes
		{"GET", "/healthz", rolePublic, s.handleHealthz},
		{"GET", "/readyz", rolePublic, s.handleReadyz},
		{"GET", "/metrics", RoleRead, s.handleMetrics},
		{"GET", "/v1/status", RoleRead, s.handleStatus},
		{"POST", "/v1/sync", RoleAdmin, s.handleSync},
		{"POST", "/v1/hooks/forgejo", rolePublic, s.handleWebhook}, // authenticated by its HMAC signature
		{"GET", "/v1/tools", RoleRead, s.handleTools},
		{"GET", "/v1/tools/{name}", RoleRead, s.handleTool},
		{"POST", "/v1/match", RoleRead, s.handleMatch},
		{"GET", "/v1/feedback", RoleAdmin, s.handleFeedback},
		{"DELETE", "/v1/feedback", RoleAdmin, s.handleFeedbackClear},
		{"POST", "/v1/feedback", RoleCall, s.handleFeedbackTeach},
		{"POST", "/v1/call", RoleCall, s.handleCall},
		{"GET", "/v1/runs/{id}", RoleCall, s.handleRun},              // a call token sees its own only
		{"GET", "/v1/runs/{id}/events", RoleCall, s.handleRunEvents}, // the same
		{"GET", "/v1/approvals", RoleApprove, s.handleApprovals},
		{"GET", "/v1/approvals/{id}", RoleCall, s.handleApproval}, // a call token sees its own only
		{"POST", "/v1/approvals/{id}", RoleApprove, s.handleDecide},
	}
}
