package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/memory"
	"github.com/chatmem/chatmem/offline"
)

// chromiumPath is Debian's chromium, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

// htmlContent is a message that must show as text, not run or render.
const htmlContent = "<script>alert(1)</script><b>bold</b>"

// TestInspector drives the inspector page in headless Chromium against a
// real server over SQLite, with API keys: it signs in with the key, opens
// the seed's conversation, moves the budget slider to 40 with the keyboard
// and checks the highlighted window against the seed (the last 3 messages,
// 36 tokens), edits a fact and reads it back through the API, checks that a
// message holding HTML shows as text, deletes a conversation through the
// confirmation, shows a user (opened by ID and from a conversation's user
// link) with their conversations and their facts' history, and fails on
// any console error or exception. Screenshots
// go to $CHATMEM_ARTIFACTS (default: a temporary directory).
func TestInspector(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		testenv.SkipOrFail(t, "no Chromium at %s (apt-get install chromium; .ci/run installs it): %v", chromiumPath, err)
	}
	artifacts := os.Getenv("CHATMEM_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}

	// A server as `chatmem serve` runs it, over SQLite, with the offline
	// summarizer and rule extractor working inside Append so the page has a
	// summary and facts to show when the appends return.
	mem := newMemory(t, openSQLite(t), func(o *chatmem.Options) {
		o.Sync = true
		o.Summarizer = offline.NewSummarizer(offline.Options{})
		o.Extractors = []chatmem.Extractor{offline.DefaultExtractor()}
		o.Summary.Trigger, o.Summary.Target = 30, 20
	})
	api, err := New(mem, Options{Keys: testKeys()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	client := NewClient(ts.URL, acmeKey, ts.Client())
	ctx := t.Context()
	_, err = client.Append(ctx, "seed", seed.History(), ClientAppendOptions{Tokenizer: "estimate"})
	must(t, "Append(seed)", err)
	if _, err := client.PatchFacts(ctx, "seed", []FactInput{{Key: "name", Value: "Kavya", SourceSeq: 1}}); err != nil {
		t.Fatalf("PatchFacts(seed): %v", err)
	}
	_, err = client.Append(ctx, "support-html", []chatmem.Message{
		{Role: chatmem.RoleUser, Content: htmlContent},
		{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{{ID: "call_1", Type: "function", Function: chatmem.FunctionCall{Name: "lookup_order", Arguments: `{"order_id":"SE-10423"}`}}}},
		{Role: chatmem.RoleTool, ToolCallID: "call_1", Content: `{"status":"out_for_delivery","eta":"20:00"}`},
		{Role: chatmem.RoleAssistant, Content: "Your order is out for delivery and arrives by 8 pm."},
	}, ClientAppendOptions{Tokenizer: "estimate"})
	must(t, "Append(support-html)", err)
	// A user with two conversations: the rule extractor takes her name and
	// email from the first, and a new email from the second supersedes the
	// first email.
	for _, c := range []struct{ id, text string }{
		{"kavya-1", "Hi, my name is Kavya and my email is kavya@example.com."},
		{"kavya-2", "My email is now kavya.rao@example.com, please use that."},
	} {
		_, err = client.Append(ctx, c.id, []chatmem.Message{{Role: chatmem.RoleUser, Content: c.text}, {Role: chatmem.RoleAssistant, Content: "Noted."}},
			ClientAppendOptions{Tokenizer: "estimate", User: "u-kavya"})
		must(t, "Append("+c.id+")", err)
	}
	// Another tenant's conversation, which the page must never show.
	_, err = NewClient(ts.URL, globexKey, ts.Client()).Append(ctx, "globex-only", seed.History()[:1], ClientAppendOptions{})
	must(t, "Append(globex-only)", err)

	b := startBrowser(t)
	shot := func(name string, a chromedp.Action[[]byte]) {
		t.Helper()
		png, err := chromedp.Run(b.ctx, a)
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(artifacts, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Sign in: the first API call is refused, so the page asks for the key.
	b.do(chromedp.EmulateViewport(1280, 800), chromedp.Navigate(ts.URL+"/"))
	b.wait(`document.getElementById("key-dialog").open`)
	b.do(
		chromedp.SendKeys(chromedp.ID("key-input"), acmeKey),
		chromedp.Click(chromedp.CSS(`#key-form button[value="save"]`)),
	)
	b.wait(`document.querySelector('#conv-rows button[data-id="seed"]') !== null`)
	if ids := b.eval(`[...document.querySelectorAll("#conv-rows button[data-id]")].map(e => e.dataset.id)`); !slices.Equal(ids.([]any), []any{"kavya-1", "kavya-2", "seed", "support-html"}) {
		t.Errorf("conversation list = %v, want [kavya-1 kavya-2 seed support-html] (acme's only)", ids)
	}

	// Open the seed: everything fits the initial budget.
	b.do(chromedp.Click(chromedp.CSS(`#conv-rows button[data-id="seed"]`)))
	b.wait(`document.querySelectorAll("#messages .msg.kept").length === 5`)
	b.wait(`document.querySelector('#fact-rows tr[data-key="name"]') !== null`)
	b.wait(`document.getElementById("summary-meta").textContent.startsWith("Covers")`)
	b.wait(`document.querySelectorAll("#chart svg path").length === 3`)
	if got := b.text("#total-tokens"); got != "63" {
		t.Errorf("tokens at the full budget = %q, want 63", got)
	}
	shot("inspector-conversation.png", chromedp.CaptureScreenshot())

	// Budget 40 with the keyboard: the slider starts at its maximum.
	top := b.eval(`Number(document.getElementById("budget").max)`).(float64)
	b.do(chromedp.Focus(chromedp.ID("budget")))
	for range int(top) - 40 {
		b.do(chromedp.KeyEvent(kb.ArrowLeft))
	}
	b.wait(`document.getElementById("policy").dataset.policy === "token_budget/40"`)
	kept := b.eval(`[...document.querySelectorAll("#messages .msg.kept")].map(e => Number(e.dataset.seq))`)
	dropped := b.eval(`[...document.querySelectorAll("#messages .msg.dropped")].map(e => Number(e.dataset.seq))`)
	if fmt.Sprint(kept) != "[3 4 5]" || fmt.Sprint(dropped) != "[1 2]" {
		t.Errorf("budget 40: highlighted %v, dimmed %v; want [3 4 5] and [1 2]", kept, dropped)
	}
	for sel, want := range map[string]string{"#total-tokens": "36", "#total-kept": "3", "#total-dropped": "2", "#part-recent": "36", "#part-system": "0", "#budget-out": "40"} {
		if got := b.text(sel); got != want {
			t.Errorf("budget 40: %s = %q, want %q", sel, got, want)
		}
	}
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById("policy").scrollIntoView()`))
	shot("inspector-policy.png", chromedp.CaptureScreenshot())
	shot("inspector-chart.png", chromedp.Screenshot(chromedp.ID("chart-panel")))
	shot("inspector-full.jpg", chromedp.FullScreenshot(90))

	// The other controls: last_turns with 1 turn sends the last message;
	// facts add their part; another tokenizer recounts, with its overhead.
	b.do(
		chromedp.SetValue(chromedp.ID("policy-kind"), "last_turns"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("policy-kind").dispatchEvent(new Event("change"))`),
		chromedp.SetValue(chromedp.ID("turns"), "1"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("turns").dispatchEvent(new Event("input"))`),
	)
	b.wait(`document.getElementById("policy").dataset.policy === "last_turns/1"`)
	if got := b.eval(`[...document.querySelectorAll("#messages .msg.kept")].map(e => Number(e.dataset.seq))`); fmt.Sprint(got) != "[5]" {
		t.Errorf("last_turns 1: highlighted %v, want [5]", got)
	}
	b.do(chromedp.Click(chromedp.ID("with-facts")))
	b.wait(`document.getElementById("part-facts").textContent !== "0" && document.getElementById("window-extra").textContent.includes("facts")`)
	b.do(
		chromedp.Click(chromedp.ID("with-facts")),
		chromedp.SetValue(chromedp.ID("tokenizer"), "o200k_base"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("tokenizer").dispatchEvent(new Event("change"))`),
	)
	b.wait(`document.getElementById("part-overhead").textContent === "3" && document.getElementById("part-facts").textContent === "0"`)
	b.do(
		chromedp.SetValue(chromedp.ID("policy-kind"), "token_budget"),
		chromedp.SetValue(chromedp.ID("tokenizer"), ""),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("tokenizer").dispatchEvent(new Event("change"))`),
	)
	b.wait(`document.getElementById("policy").dataset.policy === "token_budget/40" && document.getElementById("total-tokens").textContent === "36"`)

	// Edit a fact in the page, then read it through the API.
	b.do(chromedp.Click(chromedp.CSS(`#fact-rows tr[data-key="name"] button[data-action="edit"]`)))
	b.wait(`document.activeElement && document.activeElement.dataset.role === "fact-value"`)
	b.do(chromedp.KeyEvent("Kavya Rao" + kb.Enter)) // the value is selected, so typing replaces it
	b.wait(`document.querySelector('#fact-rows tr[data-key="name"] .value').textContent === "Kavya Rao"`)
	facts, err := client.Facts(ctx, "seed")
	must(t, "Facts(seed)", err)
	i := slices.IndexFunc(facts, func(f chatmem.Fact) bool { return f.Key == "name" })
	if i < 0 || facts[i].Value != "Kavya Rao" || facts[i].SetBy != "app" {
		t.Errorf("after the edit, Facts(seed) = %+v; want name=Kavya Rao set by app", facts)
	}

	// Delete a fact in the page.
	b.do(chromedp.Click(chromedp.CSS(`#fact-rows tr[data-key="order_id"] button[data-action="delete"]`)))
	b.wait(`document.querySelector('#fact-rows tr[data-key="order_id"]') === null`)
	facts, err = client.Facts(ctx, "seed")
	must(t, "Facts(seed)", err)
	if slices.ContainsFunc(facts, func(f chatmem.Fact) bool { return f.Key == "order_id" }) {
		t.Errorf("after the delete, Facts(seed) = %+v; want no order_id", facts)
	}

	// A user opened by ID: their conversations, and every value of their
	// facts as the API's history gives it, superseded ones with the time
	// and the message that superseded them.
	history, err := client.UserFactHistory(ctx, "u-kavya", "")
	must(t, "UserFacts(u-kavya, history)", err)
	if !slices.ContainsFunc(history, func(f chatmem.Fact) bool {
		return f.Key == "email" && f.Value == "kavya@example.com" && f.SupersededBy != nil && *f.SupersededBy == chatmem.FactRef{Conversation: "kavya-2", Seq: 1}
	}) {
		t.Fatalf("UserFacts(u-kavya, history) = %+v; want kavya@example.com superseded by kavya-2 #1", history)
	}
	slices.SortStableFunc(history, func(a, b chatmem.Fact) int { return strings.Compare(a.Key, b.Key) })
	var wantRows []string
	for _, f := range history {
		state, validTo, by := "current", "current", ""
		if !f.ValidTo.IsZero() {
			state, validTo = "superseded", f.ValidTo.Format(time.RFC3339Nano)
			by = fmt.Sprintf("%s #%d", f.SupersededBy.Conversation, f.SupersededBy.Seq)
		}
		wantRows = append(wantRows, strings.Join([]string{f.Key, state, f.Value, fmt.Sprintf("%s #%d", f.Conversation, f.SourceSeq),
			f.ValidFrom.Format(time.RFC3339Nano), validTo, by}, "|"))
	}
	b.do(chromedp.SendKeys(chromedp.ID("user-input"), "u-kavya"+kb.Enter))
	b.wait(`document.getElementById("user-view").dataset.user === "u-kavya" && !document.getElementById("user-view").hidden && document.getElementById("conversation").hidden`)
	if ids := b.eval(`[...document.querySelectorAll("#user-conv-rows button[data-id]")].map(e => e.dataset.id)`); fmt.Sprint(ids) != "[kavya-1 kavya-2]" {
		t.Errorf("u-kavya's conversations = %v, want [kavya-1 kavya-2]", ids)
	}
	const userRows = `[...document.querySelectorAll("#user-fact-rows tr")].map(r => [r.dataset.key, r.dataset.state, r.querySelector(".value").textContent,
		(r.querySelector(".said a") || {}).textContent, r.querySelector(".valid-from time").getAttribute("datetime"),
		r.querySelector(".valid-to time") ? r.querySelector(".valid-to time").getAttribute("datetime") : r.querySelector(".valid-to").textContent,
		r.querySelector(".superseded-by").textContent].join("|"))`
	if got := b.eval(userRows); fmt.Sprint(got) != fmt.Sprint(wantRows) {
		t.Errorf("u-kavya's facts show\n%v\nwant\n%v", got, wantRows)
	}
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById("user-view").scrollIntoView()`))
	shot("inspector-user.png", chromedp.CaptureScreenshot())

	// The message that superseded the old email opens in its conversation,
	// whose header links back to the user.
	b.do(chromedp.Click(chromedp.CSS(`#user-fact-rows tr[data-key="email"][data-state="superseded"] .superseded-by a`)))
	b.wait(`document.getElementById("conv-title").textContent === "kavya-2" && document.getElementById("user-view").hidden && document.activeElement && document.activeElement.dataset.seq === "1"`)
	if got := b.text("#conv-user-link"); got != "u-kavya" {
		t.Errorf("kavya-2's user link = %q, want u-kavya", got)
	}
	b.do(chromedp.Click(chromedp.ID("conv-user-link")))
	b.wait(`!document.getElementById("user-view").hidden && document.getElementById("user-view").dataset.user === "u-kavya" && document.querySelectorAll("#user-fact-rows tr").length > 0`)
	b.do(chromedp.Click(chromedp.CSS(`#user-conv-rows button[data-id="kavya-1"]`)))
	b.wait(`document.getElementById("conv-title").textContent === "kavya-1" && document.getElementById("user-view").hidden && !document.getElementById("conv-user").hidden`)

	// A message with HTML shows as text: the markup is visible, no element
	// is made from it, and no dialog opens.
	b.do(chromedp.Click(chromedp.CSS(`#conv-rows button[data-id="support-html"]`)))
	b.wait(`document.getElementById("conv-title").textContent === "support-html" && document.querySelectorAll("#messages .msg").length === 4`)
	if hidden := b.eval(`document.getElementById("conv-user").hidden`); hidden != true {
		t.Errorf("support-html has no user, yet its user link shows")
	}
	if got := b.text(`#messages .msg[data-seq="1"] .content`); got != htmlContent {
		t.Errorf("HTML message shows %q, want the text %q", got, htmlContent)
	}
	if n := b.eval(`document.querySelectorAll("#messages b, #messages script, main b").length`).(float64); n != 0 {
		t.Errorf("the HTML message made %v elements, want none", n)
	}
	if got := b.eval(`[...document.querySelectorAll("#messages .tool-pair .msg")].map(e => Number(e.dataset.seq))`); fmt.Sprint(got) != "[2 3]" {
		t.Errorf("tool pair holds messages %v, want [2 3]", got)
	}

	// Phone width: the page reflows to one column with no sideways scroll.
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Click(chromedp.CSS(`#conv-rows button[data-id="seed"]`)))
	b.wait(`document.getElementById("conv-title").textContent === "seed" && document.querySelectorAll("#messages .msg").length === 5`)
	if w := b.eval(`document.documentElement.scrollWidth`).(float64); w > 390 {
		t.Errorf("at 390px the page is %vpx wide", w)
	}
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById("main").scrollIntoView()`))
	shot("inspector-mobile.png", chromedp.CaptureScreenshot())

	// Delete a conversation through the confirmation.
	b.do(chromedp.EmulateViewport(1280, 800), chromedp.Click(chromedp.CSS(`#conv-rows button[data-id="support-html"]`)))
	b.wait(`document.getElementById("conv-title").textContent === "support-html"`)
	b.do(chromedp.Click(chromedp.ID("delete-conv")))
	b.wait(`document.getElementById("confirm-dialog").open`)
	b.do(chromedp.Click(chromedp.ID("confirm-delete")))
	b.wait(`document.getElementById("conversation").hidden && !document.querySelector('#conv-rows button[data-id="support-html"]')`)
	if _, err := client.Conversation(ctx, "support-html"); err == nil {
		t.Error("support-html still exists after the page deleted it")
	}

	for _, m := range b.problems() {
		t.Errorf("browser: %s", m)
	}
}

// TestInspectorFiles checks how the page and its files are served: without
// a key even when keys are configured, with their content types and a
// Content-Security-Policy, and with the API's error shape for the rest.
func TestInspectorFiles(t *testing.T) {
	ts := newTestServer(t, newMemory(t, memory.New(), nil), Options{})
	for _, tc := range []struct {
		method, path string
		status       int
		ctype, code  string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8", ""},
		{"HEAD", "/", 200, "text/html; charset=utf-8", ""},
		{"GET", "/inspector/app.js", 200, "text/javascript; charset=utf-8", ""},
		{"GET", "/inspector/style.css", 200, "text/css; charset=utf-8", ""},
		{"GET", "/inspector/missing.js", 404, "application/json", "not_found"},
		{"GET", "/inspector/inspector.go", 404, "application/json", "not_found"},
		{"POST", "/", 405, "application/json", "method_not_allowed"},
		{"GET", "/elsewhere", 404, "application/json", "not_found"},
	} {
		r := ts.raw(t, tc.method, tc.path, "", nil, "")
		if r.status != tc.status || r.header.Get("Content-Type") != tc.ctype {
			t.Errorf("%s %s = %d %q, want %d %q", tc.method, tc.path, r.status, r.header.Get("Content-Type"), tc.status, tc.ctype)
		}
		if tc.code != "" {
			if e := r.apiError(); e.Code != tc.code {
				t.Errorf("%s %s: code %q, want %q", tc.method, tc.path, e.Code, tc.code)
			}
		} else if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("%s %s: Content-Security-Policy %q, want script-src 'self'", tc.method, tc.path, csp)
		}
	}
	if r := ts.raw(t, "GET", "/", "", nil, ""); !strings.Contains(string(r.body), `src="/inspector/app.js"`) {
		t.Errorf("GET / does not load the script:\n%s", r.body)
	}
}

// browser is one headless Chromium tab, with the console errors,
// exceptions and dialogs it has seen.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu   sync.Mutex
	errs []string
}

// startBrowser starts Chromium with the flags this machine needs (no
// sandbox as root, no network beyond loopback) and a fresh profile. It is
// closed, and its listeners waited for, when the test ends.
func startBrowser(t *testing.T) *browser {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx}
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		cancelTab()
		cancelAlloc()
		t.Fatalf("start %s: %v", chromiumPath, err)
	}

	var wg sync.WaitGroup
	console := chromedp.Console(ctx)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	wg.Go(func() {
		for m, err := range console {
			if err != nil {
				return
			}
			// An API error answer (a 401 before the key, a 404 for a
			// conversation without a summary) is logged by the browser's
			// network stack; the page handles those. Anything else at
			// error level is a failure: script errors, CSP violations,
			// a missing file.
			if m.Source == "network" && strings.Contains(m.URL, "/v1/") {
				continue
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.fail(fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
			}
		}
	})
	wg.Go(func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.fail("a dialog opened: " + ev.Message)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	})
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		wg.Wait()
	})
	return b
}

func (b *browser) fail(msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errs = append(b.errs, msg)
}

// problems returns the errors seen so far, after letting the last events
// arrive.
func (b *browser) problems() []string {
	time.Sleep(200 * time.Millisecond)
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.errs)
}

// do runs actions, failing the test on an error.
func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v (page problems: %v)", err, b.problems())
	}
}

// eval evaluates a JavaScript expression and returns its JSON value.
func (b *browser) eval(expr string) any {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[json.RawMessage](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	var out any
	if err := json.Unmarshal(v, &out); err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return out
}

// text returns the textContent of the first element sel matches.
func (b *browser) text(sel string) string {
	b.t.Helper()
	s, _ := b.eval(fmt.Sprintf(`(document.querySelector(%q) || {}).textContent ?? null`, sel)).(string)
	return s
}

// wait polls a JavaScript expression until it is true. It polls from Go,
// not with chromedp.Poll, whose predicate is compiled in the page with
// new Function, which the inspector's Content-Security-Policy refuses.
func (b *browser) wait(expr string) {
	b.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if ok, _ := b.eval("!!(" + expr + ")").(bool); ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("timed out waiting for %s (page problems: %v)", expr, b.problems())
		}
		time.Sleep(25 * time.Millisecond)
	}
}
