// Package httpapi is chatmem's REST API; its Go client is package client.
//
// [New] returns a [Server], a [net/http.Handler] over a [chatmem.Memory]:
// JSON in and out under /v1, with conversations, their messages, the
// assembled context, facts and summary, plus /healthz, /readyz, /metrics
// (Prometheus) and /openapi.json (an OpenAPI 3.1 document of every route).
// `chatmem serve` wraps it in an http.Server; tests serve it with
// net/http/httptest.
//
// Conventions, package-wide:
//
//   - Every route the server answers is listed once, in the routes table in
//     routes.go; the mux, the 405 answers and the OpenAPI test all read it.
//   - Errors are always {"error":{"code":"...","message":"..."}}, and the
//     status and code come from one table (client.ErrorCodes) that maps the
//     root package's sentinels; anything unmapped is a 500 whose details go
//     to the log only. The Go client maps codes back, so errors.Is(err,
//     chatmem.ErrNotFound) works on both sides of the wire. The request and
//     answer bodies are package client's types too.
//   - With API keys configured ([Options.Keys]), the tenant comes from the
//     key and never from the request; another tenant's conversation is a
//     404, as if it did not exist. Without keys every request is
//     [chatmem.DefaultTenant].
//   - Every request gets a request ID (X-Request-Id) and one structured log
//     line. Message contents, fact values and API keys are never logged.
package httpapi
