package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/chatmem/chatmem/memstore"
)

// openAPIMethods are the operation keys of an OpenAPI path item.
var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// TestOpenAPI checks openapi.json against the routes table, in both
// directions: every route is documented with its method, and every
// documented path and method is served by that route. It also checks that
// the document is OpenAPI 3.1, that its references resolve, that path
// parameters are declared, that security matches the routes' Auth, and that
// every error response has the error shape.
func TestOpenAPI(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Errorf("openapi = %q, want 3.1.x", v)
	}
	paths, _ := doc["paths"].(map[string]any)
	if len(paths) == 0 {
		t.Fatal("openapi.json has no paths")
	}
	api, err := New(newMemory(t, memstore.New(), nil), Options{})
	if err != nil {
		t.Fatal(err)
	}

	// Every API route is documented (the inspector's pages are not API).
	for _, rt := range routes {
		if rt.Page {
			continue
		}
		item, _ := paths[rt.Pattern].(map[string]any)
		if _, ok := item[strings.ToLower(rt.Method)]; !ok {
			t.Errorf("route %s %s is not in openapi.json", rt.Method, rt.Pattern)
		}
	}

	// Every documented operation is a route, and the mux sends it there.
	param := regexp.MustCompile(`\{([^}]+)\}`)
	for p, v := range paths {
		item := v.(map[string]any)
		for _, m := range openAPIMethods {
			opv, ok := item[m]
			if !ok {
				continue
			}
			op := opv.(map[string]any)
			method := strings.ToUpper(m)
			i := slices.IndexFunc(routes, func(rt route) bool { return rt.Method == method && rt.Pattern == p })
			if i < 0 {
				t.Errorf("openapi.json documents %s %s, which is not in the routes table", method, p)
				continue
			}
			rt := routes[i]
			req := httptest.NewRequest(method, param.ReplaceAllString(p, "x"), nil)
			if _, pattern := api.mux.Handler(req); pattern != method+" "+p {
				t.Errorf("%s %s is served by pattern %q", method, p, pattern)
			}

			// Path parameters are declared on the path or the operation.
			declared := map[string]bool{}
			for _, list := range []any{item["parameters"], op["parameters"]} {
				ps, _ := list.([]any)
				for _, pv := range ps {
					pm := resolve(t, doc, pv)
					if pm["in"] == "path" {
						declared[pm["name"].(string)] = true
					}
				}
			}
			for _, m := range param.FindAllStringSubmatch(p, -1) {
				if !declared[m[1]] {
					t.Errorf("%s %s: path parameter %s is not declared", method, p, m[1])
				}
			}

			// Security: the routes that need a key inherit the global
			// bearer requirement; the others opt out with an empty list.
			sec, has := op["security"].([]any)
			if open := has && len(sec) == 0; open == rt.Auth {
				t.Errorf("%s %s: security %v, but the route's Auth is %v", method, p, op["security"], rt.Auth)
			}

			// Responses: a success, and every error in the error shape.
			responses, _ := op["responses"].(map[string]any)
			success := false
			for status, rv := range responses {
				if strings.HasPrefix(status, "2") {
					success = true
					continue
				}
				resp := resolve(t, doc, rv)
				content, _ := resp["content"].(map[string]any)
				js, _ := content["application/json"].(map[string]any)
				schema, _ := js["schema"].(map[string]any)
				if schema["$ref"] != "#/components/schemas/Error" {
					t.Errorf("%s %s: response %s is not an Error", method, p, status)
				}
			}
			if !success {
				t.Errorf("%s %s documents no success response", method, p)
			}
			want := []string{}
			if rt.Auth {
				want = append(want, "400", "401", "403")
			}
			if bodyTypes(rt, httptest.NewRequest(method, "/", nil)) != nil {
				want = append(want, "415")
			}
			for _, status := range want {
				if _, ok := responses[status]; !ok {
					t.Errorf("%s %s does not document %s", method, p, status)
				}
			}
		}
	}

	// Every reference resolves.
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				resolve(t, doc, v)
				_ = ref
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)

	// The error codes documented are the table's.
	codes := resolve(t, doc, map[string]any{"$ref": "#/components/schemas/Error"})
	enum := codes["properties"].(map[string]any)["error"].(map[string]any)["properties"].(map[string]any)["code"].(map[string]any)["enum"].([]any)
	want := []any{codeInternal}
	for _, e := range errorCodes {
		want = append(want, e.code)
	}
	for _, c := range want {
		if !slices.Contains(enum, c) {
			t.Errorf("Error.code enum lacks %v", c)
		}
	}
	if len(enum) != len(want) {
		t.Errorf("Error.code enum = %v, want the codes %v", enum, want)
	}
}

// resolve follows v's local $ref, if it has one, and returns the object.
func resolve(t *testing.T, doc map[string]any, v any) map[string]any {
	t.Helper()
	m, _ := v.(map[string]any)
	ref, ok := m["$ref"].(string)
	if !ok {
		return m
	}
	var cur any = doc
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		obj, _ := cur.(map[string]any)
		if cur, ok = obj[part]; !ok {
			t.Fatalf("$ref %s does not resolve", ref)
		}
	}
	out, ok := cur.(map[string]any)
	if !ok {
		t.Fatalf("$ref %s is not an object", ref)
	}
	return out
}
