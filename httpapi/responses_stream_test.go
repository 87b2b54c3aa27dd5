package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

// streamedReply posts a streamed response on a new conversation and
// returns the stream and the stored reply.
func streamedReply(t *testing.T, srvURL, key, input string, mem *chatmem.Memory, tenant string) (string, chatmem.Message) {
	t.Helper()
	req, _ := http.NewRequest("POST", srvURL+openAIPrefix+"/responses", strings.NewReader(`{"model":"m","input":`+fmt.Sprintf("%q", input)+`,"stream":true}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	stream := sb.String()
	if resp.StatusCode != http.StatusOK || !strings.Contains(stream, "event: response.completed") {
		t.Fatalf("stream: %d %s", resp.StatusCode, stream)
	}
	r := completedOf(t, []byte(stream))
	k, seq, ok := parseResponseID(tenant, r.ID)
	if !ok {
		t.Fatalf("response ID %q", r.ID)
	}
	msgs, err := mem.Messages(t.Context(), k, seq-1, 1)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("the reply: %v %v", msgs, err)
	}
	return stream, msgs[0]
}

// TestResponsesStreamTenantUpstream: a tenant's own upstream streams with
// the tenant's key redacted, on a server with no upstream of its own (the
// stream once read the server's upstream's key, and dereferenced nil).
func TestResponsesStreamTenantUpstream(t *testing.T) {
	const own = "sk-acme-own-key-0042"
	up := newFakeUpstream(t)
	up.push(fakeReply{content: "the key is " + own + " indeed"})
	mem, err := chatmem.New(memstore.New(), chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(mem, Options{Keys: []Key{{Tenant: "acme", Key: proxyKey}},
		TenantUpstreams: map[string]Upstream{"acme": {BaseURL: up.URL + "/v1", APIKey: own}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	stream, reply := streamedReply(t, srv.URL, proxyKey, "hello", mem, "acme")
	if reply.Content != "the key is [upstream key] indeed" {
		t.Errorf("stored %q, want the tenant's key redacted", reply.Content)
	}
	if i := strings.Index(stream, "event: response.output_text.done"); i < 0 || strings.Contains(stream[i:], own) {
		t.Errorf("the stream's done events carry the key: %s", stream)
	}
}

// TestResponsesStreamTextAfterCall: text the model streams after a tool
// call goes on in the text item, to the client and to the store (it was
// once dropped).
func TestResponsesStreamTextAfterCall(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, delta := range []string{
			`{"role":"assistant","content":"Let me check. "}`,
			`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"q\":1}"}}]}`,
			`{"content":"Done."}`,
		} {
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", delta)
		}
		fmt.Fprint(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	env := newProxyEnv(t, proxyConfig{baseURL: up.URL + "/v1"})
	stream, reply := streamedReply(t, env.url, proxyKey, "hello", env.mem, "acme")
	if reply.Content != "Let me check. Done." || len(reply.ToolCalls) != 1 || reply.ToolCalls[0].Function.Name != "lookup" {
		t.Errorf("stored %q with %+v, want the text before and after the call, and the call", reply.Content, reply.ToolCalls)
	}
	if !strings.Contains(stream, `"delta":"Done."`) || !strings.Contains(stream, `"text":"Let me check. Done."`) {
		t.Errorf("the stream lost the text after the call: %s", stream)
	}
}

// TestResponsesStreamSplitKey: the upstream's key split over two stream
// events (the fake upstream sends text in 4-byte pieces and arguments in
// halves) is not stored, in the text or in a call's arguments.
func TestResponsesStreamSplitKey(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	env.up.push(fakeReply{content: "key " + upstreamKey + ".", toolCalls: []chatmem.ToolCall{
		{ID: "call_1", Type: "function", Function: chatmem.FunctionCall{Name: "f", Arguments: `{"k":"` + upstreamKey + `"}`}}}})
	_, reply := streamedReply(t, env.url, proxyKey, "hello", env.mem, "acme")
	b, _ := json.Marshal(reply)
	if strings.Contains(string(b), upstreamKey) || !strings.Contains(reply.Content, "[upstream key]") || !strings.Contains(reply.ToolCalls[0].Function.Arguments, "[upstream key]") {
		t.Errorf("stored %s, want the key redacted in the text and the arguments", b)
	}
}
