package httpapi

// route is one method and path the server answers. Pattern is in the syntax
// of both net/http.ServeMux and OpenAPI ({id} is a path parameter).
type route struct {
	Method  string
	Pattern string
	// Auth says the route needs an API key when keys are configured.
	Auth   bool
	handle func(*Server, *call) error
}

// routes is every route the server registers. The mux is built from it, the
// 405 answers list its methods per path, and the OpenAPI test checks it
// against openapi.json in both directions.
var routes = []route{
	{"GET", "/v1/conversations", true, (*Server).listConversations},
	{"GET", "/v1/conversations/{id}", true, (*Server).getConversation},
	{"DELETE", "/v1/conversations/{id}", true, (*Server).deleteConversation},
	{"POST", "/v1/conversations/{id}/messages", true, (*Server).appendMessages},
	{"GET", "/v1/conversations/{id}/messages", true, (*Server).listMessages},
	{"GET", "/v1/conversations/{id}/context", true, (*Server).getContext},
	{"GET", "/v1/conversations/{id}/facts", true, (*Server).getFacts},
	{"PATCH", "/v1/conversations/{id}/facts", true, (*Server).patchFacts},
	{"PUT", "/v1/conversations/{id}/facts", true, (*Server).putFacts},
	{"DELETE", "/v1/conversations/{id}/facts", true, (*Server).deleteFacts},
	{"GET", "/v1/conversations/{id}/summary", true, (*Server).getSummary},
	{"GET", "/healthz", false, (*Server).healthz},
	{"GET", "/readyz", false, (*Server).readyz},
	{"GET", "/metrics", false, (*Server).getMetrics},
	{"GET", "/openapi.json", false, (*Server).getOpenAPI},
}

// routeUnmatched is the route label of requests no route matched.
const routeUnmatched = "unmatched"
