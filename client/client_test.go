package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
)

// TestError checks how the Client reads error responses: the API's
// error body gives the code and message, and the code unwraps to its
// sentinel; any other body gives its start as the message and no code.
func TestError(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		code   string
		msg    string
		is     error
	}{
		{404, `{"error":{"code":"not_found","message":"gone"}}`, "not_found", "gone", chatmem.ErrNotFound},
		{409, `{"error":{"code":"conflict","message":"x"}}`, "conflict", "x", chatmem.ErrConflict},
		{413, `{"error":{"code":"too_large","message":"x"}}`, "too_large", "x", chatmem.ErrTooLarge},
		{422, `{"error":{"code":"budget_too_small","message":"x"}}`, "budget_too_small", "x", chatmem.ErrBudgetTooSmall},
		{400, `{"error":{"code":"invalid_request","message":"x"}}`, "invalid_request", "x", chatmem.ErrInvalid},
		{401, `{"error":{"code":"unauthorized","message":"x"}}`, "unauthorized", "x", client.ErrUnauthorized},
		{405, `{"error":{"code":"method_not_allowed","message":"x"}}`, "method_not_allowed", "x", client.ErrMethodNotAllowed},
		{503, `{"error":{"code":"unavailable","message":"x"}}`, "unavailable", "x", chatmem.ErrUnavailable},
		{500, `{"error":{"code":"internal","message":"x"}}`, "internal", "x", nil},
		{502, `<html>bad gateway</html>`, "", "<html>bad gateway</html>", nil},
		{502, ``, "", "Bad Gateway", nil},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Request-Id", "rid")
			w.WriteHeader(tc.status)
			w.Write([]byte(tc.body))
		}))
		_, err := client.New(srv.URL, "", srv.Client()).Conversation(context.Background(), "c")
		srv.Close()
		var e *client.Error
		if !errors.As(err, &e) {
			t.Errorf("%d %s: error %v, want a *client.Error", tc.status, tc.body, err)
			continue
		}
		if e.Status != tc.status || e.Code != tc.code || e.RequestID != "rid" || e.Message != tc.msg {
			t.Errorf("%d %s: error %+v, want code %q, message %q, request rid", tc.status, tc.body, e, tc.code, tc.msg)
		}
		if tc.is != nil && !errors.Is(err, tc.is) || tc.is == nil && errors.Unwrap(e) != nil {
			t.Errorf("%d %s: unwraps to %v, want %v", tc.status, tc.body, errors.Unwrap(e), tc.is)
		}
	}
}

// TestRequests checks what the Client sends: the key as a bearer token, an
// ID escaped into one path segment, If-Match and Idempotency-Key, the TTL
// in whole seconds rounded up; and that a server it cannot reach is
// chatmem.ErrUnavailable.
func TestRequests(t *testing.T) {
	var got atomic.Pointer[http.Request]
	var body atomic.Pointer[string]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s := string(b)
		got.Store(r)
		body.Store(&s)
		w.Header().Set("Idempotent-Replayed", "true")
		w.Write([]byte(`{"messages":[],"conversation":{"id":"a/b","last_seq":3}}`))
	}))
	defer srv.Close()
	c := client.New(srv.URL+"/", "k1", srv.Client())
	seq := int64(2)
	res, err := c.Append(context.Background(), "a/b", []chatmem.Message{{Role: chatmem.RoleUser, Content: "hi"}},
		client.AppendOptions{IfMatch: &seq, IdempotencyKey: "i1", TTL: 1500 * time.Millisecond, User: "u"})
	if err != nil {
		t.Fatal(err)
	}
	r := got.Load()
	if r.Method != "POST" || r.URL.EscapedPath() != "/v1/conversations/a%2Fb/messages" {
		t.Errorf("request %s %s, want POST /v1/conversations/a%%2Fb/messages", r.Method, r.URL.EscapedPath())
	}
	for h, want := range map[string]string{"Authorization": "Bearer k1", "If-Match": `"2"`, "Idempotency-Key": "i1", "Content-Type": "application/json"} {
		if v := r.Header.Get(h); v != want {
			t.Errorf("header %s = %q, want %q", h, v, want)
		}
	}
	if want := `{"messages":[{"role":"user","content":"hi"}],"ttl_seconds":2,"user":"u"}`; *body.Load() != want {
		t.Errorf("body %s, want %s", *body.Load(), want)
	}
	if !res.Replayed || res.Conversation.ID != "a/b" || res.Conversation.LastSeq != 3 {
		t.Errorf("Append = %+v, want replayed, conversation a/b at 3", res)
	}

	srv.Close()
	if err := c.Health(context.Background()); !errors.Is(err, chatmem.ErrUnavailable) {
		t.Errorf("Health of a closed server = %v, want ErrUnavailable", err)
	}
}
