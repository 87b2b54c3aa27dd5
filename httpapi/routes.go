package httpapi

import (
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/httpapi/inspector"
)

// chatCompletionsPattern is the chat proxy's route: its errors, those of
// authentication and rate limiting included, are in OpenAI's shape, which
// the OpenAI clients pointed at it parse.
const chatCompletionsPattern = "/v1/chat/completions"

// modelsPattern is the upstream's model list, relayed for OpenAI-compatible
// apps, with the chat proxy's error shape.
const modelsPattern = "/v1/models"

// openAIRoute reports whether a route's errors are in OpenAI's shape, and
// whether --upstream-auth passthrough reads the client's Authorization as
// the upstream's: the chat proxy's, the model routes' and everything
// under openAIPrefix. It takes a route's pattern or a request's path.
func openAIRoute(pattern string) bool {
	return pattern == chatCompletionsPattern || pattern == modelsPattern || strings.HasPrefix(pattern, modelsPattern+"/") ||
		strings.HasPrefix(pattern, openAIPrefix+"/")
}

// importPattern is the import's route, whose body is NDJSON.
const importPattern = "/v1/import"

// route is one method and path the server answers. Pattern is in the syntax
// of both net/http.ServeMux and OpenAPI ({id} is a path parameter).
type route struct {
	Method  string
	Pattern string
	// Auth says the route needs an API key when keys are configured.
	Auth   bool
	handle func(*Server, *call) error
	// Page marks the inspector's page and files: served beside the API,
	// not part of it, so openapi.json leaves them out.
	Page bool
}

// routes is every route the server registers. The mux is built from it, the
// 405 answers list its methods per path, and the OpenAPI test checks its
// API routes (all but the Page ones) against openapi.json in both
// directions.
var routes = []route{
	{"GET", "/v1/conversations", true, (*Server).listConversations, false},
	{"GET", "/v1/conversations/{id}", true, (*Server).getConversation, false},
	{"DELETE", "/v1/conversations/{id}", true, (*Server).deleteConversation, false},
	{"POST", "/v1/conversations/{id}/messages", true, (*Server).appendMessages, false},
	{"GET", "/v1/conversations/{id}/messages", true, (*Server).listMessages, false},
	{"GET", "/v1/conversations/{id}/context", true, (*Server).getContext, false},
	{"GET", "/v1/conversations/{id}/receipts", true, (*Server).listReceipts, false},
	{"GET", "/v1/conversations/{id}/messages/{seq}/receipt", true, (*Server).getReceipt, false},
	{"POST", "/v1/conversations/{id}/turn", true, (*Server).turn, false},
	{"POST", "/v1/conversations/{id}/messages/{seq}/redact", true, (*Server).redactMessage, false},
	{"POST", "/v1/conversations/{id}/rewind", true, (*Server).rewindConversation, false},
	{"GET", "/v1/conversations/{id}/facts", true, (*Server).getFacts, false},
	{"PATCH", "/v1/conversations/{id}/facts", true, (*Server).patchFacts, false},
	{"PUT", "/v1/conversations/{id}/facts", true, (*Server).putFacts, false},
	{"DELETE", "/v1/conversations/{id}/facts", true, (*Server).deleteFacts, false},
	{"GET", "/v1/conversations/{id}/summary", true, (*Server).getSummary, false},
	{"POST", "/v1/conversations/{id}/search", true, (*Server).searchConversation, false},
	{"GET", "/v1/conversations/{id}/export", true, (*Server).exportConversation, false},
	{"GET", "/v1/export", true, (*Server).exportTenant, false},
	{"POST", importPattern, true, (*Server).importNDJSON, false},
	{"GET", "/v1/users", true, (*Server).listUsers, false},
	{"POST", "/v1/users/{user}/search", true, (*Server).searchUser, false},
	{"GET", "/v1/users/{user}/facts", true, (*Server).getUserFacts, false},
	{"PATCH", "/v1/users/{user}/facts", true, (*Server).patchUserFacts, false},
	{"PUT", "/v1/users/{user}/facts", true, (*Server).putUserFacts, false},
	{"DELETE", "/v1/users/{user}/facts", true, (*Server).deleteUserFacts, false},
	{"DELETE", "/v1/users/{user}", true, (*Server).deleteUser, false},
	{"GET", "/v1/users/{user}/export", true, (*Server).exportUser, false},
	{"GET", "/v1/usage", true, (*Server).getUsage, false},
	{"GET", "/v1/prices", true, (*Server).getPrices, false},
	{"POST", chatCompletionsPattern, true, (*Server).chatCompletions, false},
	{"GET", modelsPattern, true, (*Server).listModels, false},
	{"GET", modelsPattern + "/{model}", true, (*Server).getModel, false},
	{"POST", openAIPrefix + "/chat/completions", true, (*Server).chatCompletions, false},
	{"GET", openAIPrefix + "/models", true, (*Server).listModels, false},
	{"GET", openAIPrefix + "/models/{model}", true, (*Server).getModel, false},
	{"POST", openAIPrefix + "/conversations", true, openAIHandler((*Server).createConversation), false},
	{"GET", openAIPrefix + "/conversations/{id}", true, openAIHandler((*Server).getOpenAIConversation), false},
	{"POST", openAIPrefix + "/conversations/{id}", true, openAIHandler((*Server).updateOpenAIConversation), false},
	{"POST", openAIPrefix + "/conversations/{id}/items", true, openAIHandler((*Server).createConversationItems), false},
	{"GET", openAIPrefix + "/conversations/{id}/items", true, openAIHandler((*Server).listConversationItems), false},
	{"GET", openAIPrefix + "/conversations/{id}/items/{item}", true, openAIHandler((*Server).getConversationItem), false},
	{"DELETE", openAIPrefix + "/conversations/{id}/items/{item}", true, openAIHandler((*Server).deleteConversationItem), false},
	{"DELETE", openAIPrefix + "/conversations/{id}", true, openAIHandler((*Server).deleteOpenAIConversation), false},
	{"POST", openAIPrefix + "/responses", true, openAIHandler((*Server).createResponse), false},
	{"GET", openAIPrefix + "/responses/{id}", true, openAIHandler((*Server).getResponse), false},
	{"DELETE", openAIPrefix + "/responses/{id}", true, openAIHandler((*Server).deleteResponse), false},
	{"GET", openAIPrefix + "/responses/{id}/input_items", true, openAIHandler((*Server).listResponseInputItems), false},
	{"GET", "/healthz", false, (*Server).healthz, false},
	{"GET", "/readyz", false, (*Server).readyz, false},
	{"GET", "/metrics", false, (*Server).getMetrics, false},
	{"GET", "/openapi.json", false, (*Server).getOpenAPI, false},
	{"GET", "/v1/version", false, (*Server).getVersion, false},
	{"GET", "/{$}", false, (*Server).inspectorPage, true},
	{"GET", "/inspector/{file}", false, (*Server).inspectorFile, true},
}

// routeUnmatched is the route label of requests no route matched.
const routeUnmatched = "unmatched"

// inspectorPage serves the inspector's page. It needs no key: the page holds
// no data, and asks for the key to call the API with.
func (s *Server) inspectorPage(c *call) error {
	return serveInspectorFile(c, "index.html")
}

// inspectorFile serves the page's script and style sheet.
func (s *Server) inspectorFile(c *call) error {
	return serveInspectorFile(c, c.r.PathValue("file"))
}

// inspectorCSP lets the page load only its own script and style and call
// only its own origin: message content is never markup, and if it ever
// became some, it could run nothing.
const inspectorCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func serveInspectorFile(c *call, name string) error {
	b, err := fs.ReadFile(inspector.Files, name)
	if err != nil {
		return fmt.Errorf("%w: no inspector file %q", chatmem.ErrNotFound, name)
	}
	h := c.w.Header()
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	h.Set("Content-Type", ctype)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", inspectorCSP)
	c.w.WriteHeader(http.StatusOK)
	if c.r.Method != http.MethodHead {
		_, _ = c.w.Write(b)
	}
	return nil
}
