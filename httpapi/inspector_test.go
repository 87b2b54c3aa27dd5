package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
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
	"github.com/chatmem/chatmem/client"
	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/memstore"
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
	ts, cl := inspectorServer(t)
	ctx := t.Context()
	artifacts := artifactsDir(t)

	b := startBrowser(t)
	shot := func(name string, a chromedp.Action[[]byte]) {
		t.Helper()
		b.shot(artifacts, name, a)
	}

	// Sign in: the first API call is refused, so the page asks for the key.
	b.signIn(ts.URL)
	if ids := b.eval(`[...document.querySelectorAll("#conv-rows button[data-id]")].map(e => e.dataset.id)`); !slices.Equal(ids.([]any), []any{"kavya-1", "kavya-2", "seed", "support-html", "support-indic"}) {
		t.Errorf("conversation list = %v, want [kavya-1 kavya-2 seed support-html support-indic] (acme's only)", ids)
	}

	// Open the seed (TestInspectorDefaultBudget checks where the slider
	// starts).
	b.open("seed")
	b.wait(`document.querySelector('#fact-rows tr[data-key="name"]') !== null`)
	b.wait(`document.getElementById("summary-meta").textContent.startsWith("Covers")`)
	b.wait(`document.querySelectorAll("#chart svg path").length === 3`)
	shot("inspector-conversation.png", chromedp.CaptureScreenshot())

	// Budget 40 with the keyboard, from where the slider starts.
	from := int(b.eval(`Number(document.getElementById("budget").value)`).(float64))
	b.do(chromedp.Focus(chromedp.ID("budget")))
	for ; from > 40; from-- {
		b.do(chromedp.KeyEvent(kb.ArrowLeft))
	}
	for ; from < 40; from++ {
		b.do(chromedp.KeyEvent(kb.ArrowRight))
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
	facts, err := cl.Facts(ctx, "seed")
	must(t, "Facts(seed)", err)
	i := slices.IndexFunc(facts, func(f chatmem.Fact) bool { return f.Key == "name" })
	if i < 0 || facts[i].Value != "Kavya Rao" || facts[i].SetBy != "app" {
		t.Errorf("after the edit, Facts(seed) = %+v; want name=Kavya Rao set by app", facts)
	}

	// Delete a fact in the page.
	b.do(chromedp.Click(chromedp.CSS(`#fact-rows tr[data-key="order_id"] button[data-action="delete"]`)))
	b.wait(`document.querySelector('#fact-rows tr[data-key="order_id"]') === null`)
	facts, err = cl.Facts(ctx, "seed")
	must(t, "Facts(seed)", err)
	if slices.ContainsFunc(facts, func(f chatmem.Fact) bool { return f.Key == "order_id" }) {
		t.Errorf("after the delete, Facts(seed) = %+v; want no order_id", facts)
	}

	// A user opened by ID: their conversations, and every value of their
	// facts as the API's history gives it, superseded ones with the time
	// and the message that superseded them.
	history, err := cl.UserFactHistory(ctx, "u-kavya", "")
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
	if _, err := cl.Conversation(ctx, "support-html"); err == nil {
		t.Error("support-html still exists after the page deleted it")
	}

	for _, m := range b.problems() {
		t.Errorf("browser: %s", m)
	}
}

// TestInspectorDefaultBudget checks where the budget slider starts: on the
// seed, a quarter of its tokens (never less than its newest turn), which
// leaves its older messages dimmed as dropped; on a conversation over the
// proxy's default budget, at that budget.
func TestInspectorDefaultBudget(t *testing.T) {
	ts, cl := inspectorServer(t)
	ctx := t.Context()
	long := make([]chatmem.Message, 60)
	for i := range long {
		long[i] = chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("%02d %s", i, strings.Repeat("Where is my order? ", 20))}
		if i%2 == 1 {
			long[i].Role = chatmem.RoleAssistant
		}
	}
	_, err := cl.Append(ctx, "long", long, client.AppendOptions{Tokenizer: "estimate"})
	must(t, "Append(long)", err)

	b := startBrowser(t)
	b.signIn(ts.URL)
	for _, conv := range []string{"seed", "long"} {
		c, err := cl.Conversation(ctx, conv)
		must(t, "Conversation("+conv+")", err)
		total := int(c.Tokens + c.SystemTokens)
		b.open(conv)
		b.wait(`document.getElementById("policy").dataset.policy === "token_budget/" + document.getElementById("budget").value`)
		budget := int(b.eval(`Number(document.getElementById("budget").value)`).(float64))
		want := total / 4
		if total > 4000 {
			want = 4000
		}
		if budget < want*3/4 || budget > want*5/4 || budget >= total {
			t.Errorf("%s (%d tokens): the slider starts at %d, want about %d (a quarter, or the proxy's 4000 over it)", conv, total, budget, want)
		}
		if got := b.text("#budget-out"); got != fmt.Sprint(budget) {
			t.Errorf("%s: the budget shows %q, want %d", conv, got, budget)
		}
		kept := b.eval(`[...document.querySelectorAll("#messages .msg.kept")].map(e => Number(e.dataset.seq))`).([]any)
		dropped := b.eval(`document.querySelectorAll("#messages .msg.dropped").length`).(float64)
		if len(kept) == 0 || kept[len(kept)-1] != float64(c.LastSeq) || dropped == 0 {
			t.Errorf("%s at the starting budget %d: sent %v, %v dimmed; want the newest message sent and some dimmed", conv, budget, kept, dropped)
		}
		if conv == "seed" {
			b.shot(artifactsDir(t), "inspector-default-budget.png", chromedp.CaptureScreenshot())
		}
	}
	for _, m := range b.problems() {
		t.Errorf("browser: %s", m)
	}
}

// TestInspectorPolicyControls checks that each policy shows the controls
// it takes and no others, and asks for the context with just those.
func TestInspectorPolicyControls(t *testing.T) {
	ts, _ := inspectorServer(t)
	b := startBrowser(t)
	b.signIn(ts.URL)
	b.open("kavya-1")
	budget := b.text("#budget-out")
	const controls = `["budget", "budget-cap", "turns", "recall", "recent", "scope", "with-facts", "tokenizer"].filter(id => { const e = document.getElementById(id); return e && e.checkVisibility() })`
	for _, tc := range []struct {
		kind  string
		click string // a checkbox to tick first
		shown string
		query string
	}{
		{"all", "", "[with-facts tokenizer]", "policy=all"},
		{"last_turns", "", "[budget budget-cap turns with-facts tokenizer]", "policy=last_turns&turns=2"},
		{"last_turns", "budget-cap", "[budget budget-cap turns with-facts tokenizer]", "policy=last_turns&budget=" + budget + "&turns=2"},
		{"token_budget", "", "[budget with-facts tokenizer]", "policy=token_budget&budget=" + budget},
		{"summary_buffer", "", "[budget recall with-facts tokenizer]", "policy=summary_buffer&budget=" + budget},
		{"summary_buffer", "recall", "[budget recall recent scope with-facts tokenizer]", "policy=summary_buffer&budget=" + budget + "&recall=true"},
		{"recall", "", "[budget recent scope with-facts tokenizer]", "policy=recall&budget=" + budget},
	} {
		b.do(
			chromedp.SetValue(chromedp.ID("policy-kind"), tc.kind),
			chromedp.Evaluate[chromedp.Void](`document.getElementById("policy-kind").dispatchEvent(new Event("change"))`),
		)
		if tc.click != "" {
			b.do(chromedp.Click(chromedp.ID(tc.click)))
		}
		if got := fmt.Sprint(b.eval(controls)); got != tc.shown {
			t.Errorf("%s %s: controls shown %s, want %s", tc.kind, tc.click, got, tc.shown)
		}
		b.wait(fmt.Sprintf(`document.getElementById("policy").dataset.query === %q || document.getElementById("policy").dataset.query === undefined`, tc.query))
		if got, _ := b.eval(`document.getElementById("policy").dataset.query ?? null`).(string); got != tc.query {
			t.Errorf("%s %s: asks for %q, want %q", tc.kind, tc.click, got, tc.query)
		}
		if tc.click != "" {
			b.do(chromedp.Click(chromedp.ID(tc.click)))
		}
	}
	// Recall from the user's conversations: kavya-1 has a user.
	b.do(
		chromedp.SetValue(chromedp.ID("policy-kind"), "recall"),
		chromedp.SetValue(chromedp.ID("scope"), "user"),
		chromedp.SetValue(chromedp.ID("recent"), "20"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("scope").dispatchEvent(new Event("change"))`),
	)
	want := "policy=recall&budget=" + budget + "&recent=20&scope=user"
	b.wait(fmt.Sprintf(`document.getElementById("policy").dataset.query === %q && document.getElementById("policy-error").hidden`, want))
	b.shot(artifactsDir(t), "inspector-recall.png", chromedp.Screenshot(chromedp.ID("policy")))
	for _, m := range b.problems() {
		t.Errorf("browser: %s", m)
	}
}

// TestInspectorFacts checks that a conversation's Facts panel shows the
// facts the model gets with facts=true: its user's and its own, each
// marked with its scope, and on a key both have the conversation's sent and
// the user's marked as not sent, as the API's window has them.
func TestInspectorFacts(t *testing.T) {
	ts, cl := inspectorServer(t)
	ctx := t.Context()
	_, err := cl.PatchFacts(ctx, "kavya-2", []FactInput{{Key: "name", Value: "Kavya R."}, {Key: "order_id", Value: "SE-20001"}})
	must(t, "PatchFacts(kavya-2)", err)
	b := startBrowser(t)
	b.signIn(ts.URL)
	const rows = `[...document.querySelectorAll("#fact-rows tr")].map(r => [r.dataset.key, r.querySelector(".scope").textContent, r.dataset.sent, r.querySelector(".value").firstChild.textContent].join(" "))`
	for _, conv := range []string{"kavya-1", "kavya-2"} {
		w, err := cl.Context(ctx, conv, client.ContextParams{Policy: chatmem.PolicyAll, Facts: true})
		must(t, "Context("+conv+", facts)", err)
		var want []string
		for _, f := range w.Facts {
			want = append(want, fmt.Sprintf("%s %s true %s", f.Key, f.Scope, f.Value))
		}
		b.open(conv)
		got := b.eval(rows).([]any)
		var sent []string
		for _, r := range got {
			if strings.Contains(r.(string), " true ") {
				sent = append(sent, r.(string))
			}
		}
		if fmt.Sprint(sent) != fmt.Sprint(want) {
			t.Errorf("%s: facts shown as sent\n%v\nwant the window's\n%v\n(all rows: %v)", conv, sent, want, got)
		}
		if !slices.Contains(got, any("name user "+fmt.Sprint(conv == "kavya-1")+" Kavya")) {
			t.Errorf("%s: facts %v; want u-kavya's name Kavya marked user (sent: %v)", conv, got, conv == "kavya-1")
		}
	}
	if note := b.text(`#fact-rows tr[data-key="name"][data-scope="user"] .overridden`); !strings.Contains(note, "conversation") {
		t.Errorf("kavya-2: the user's name shows %q, want a note that the conversation's value wins", note)
	}
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById("facts-panel").scrollIntoView()`))
	b.shot(artifactsDir(t), "inspector-facts.png", chromedp.CaptureScreenshot())

	// A user's fact edited in the conversation's page is the user's.
	b.do(chromedp.Click(chromedp.CSS(`#fact-rows tr[data-key="email"][data-scope="user"] button[data-action="edit"]`)))
	b.wait(`document.activeElement && document.activeElement.dataset.role === "fact-value"`)
	b.do(chromedp.KeyEvent("k.rao@example.com" + kb.Enter))
	b.wait(`document.querySelector('#fact-rows tr[data-key="email"][data-scope="user"] .value').textContent === "k.rao@example.com"`)
	facts, err := cl.UserFacts(ctx, "u-kavya")
	must(t, "UserFacts(u-kavya)", err)
	if i := slices.IndexFunc(facts, func(f chatmem.Fact) bool { return f.Key == "email" }); i < 0 || facts[i].Value != "k.rao@example.com" {
		t.Errorf("after the edit, UserFacts(u-kavya) = %+v; want email k.rao@example.com", facts)
	}
	for _, m := range b.problems() {
		t.Errorf("browser: %s", m)
	}
}

// TestInspectorScripts checks that messages in Devanagari and Tamil render
// with a font for their script, not as the boxes of missing glyphs: the
// boxes are all one width, where a font's letters are not, so each
// message's letters must measure (in its font) at several widths. It needs
// fonts for both (fc-list :lang=hi and :lang=ta), which .ci/run installs.
func TestInspectorScripts(t *testing.T) {
	for _, lang := range []string{"hi", "ta"} {
		out, err := exec.Command("fc-list", ":lang="+lang, "family").Output()
		if err != nil || len(strings.TrimSpace(string(out))) == 0 {
			testenv.SkipOrFail(t, "no font for language %s (fc-list :lang=%s: %v); apt-get install fonts-noto-core, as .ci/run does", lang, lang, err)
		}
	}
	ts, _ := inspectorServer(t)
	b := startBrowser(t)
	b.signIn(ts.URL)
	b.open("support-indic")
	// The distinct widths of each message's letters of its script (U+0900
	// to U+0DFF: Devanagari to Sinhala).
	const widths = `[...document.querySelectorAll("#messages .msg .content")].map(e => {
		const c = document.createElement("canvas").getContext("2d");
		c.font = getComputedStyle(e).font;
		const letters = [...e.textContent].filter(ch => ch >= "\u0900" && ch <= "\u0DFF");
		return new Set(letters.map(ch => c.measureText(ch).width.toFixed(1))).size;
	})`
	got := b.eval(widths).([]any)
	if len(got) != len(indicTexts) {
		t.Fatalf("support-indic shows %d messages, want %d", len(got), len(indicTexts))
	}
	for i, n := range got {
		t.Logf("%s message %d: its letters measure at %v widths", indicTexts[i].lang, i+1, n)
		if n.(float64) < 3 {
			t.Errorf("%s message %d: its letters measure at %v widths, as boxes of missing glyphs do: no font for its script", indicTexts[i].lang, i+1, n)
		}
	}
	b.shot(artifactsDir(t), "inspector-scripts.png", chromedp.Screenshot(chromedp.ID("messages-panel")))
	for _, m := range b.problems() {
		t.Errorf("browser: %s", m)
	}
}

// TestInspectorContrast checks that status and error texts, and the
// dimmed messages a window drops, are readable: WCAG 2.x AA, a contrast
// ratio of at least 4.5 against what is behind them, from the computed
// styles (colours, backgrounds and opacity up the tree).
func TestInspectorContrast(t *testing.T) {
	ts, _ := inspectorServer(t)
	b := startBrowser(t)
	check := func(when string, selectors ...string) {
		t.Helper()
		b.wait(`document.getAnimations().length === 0`) // colours mid-transition are neither's
		sel, _ := json.Marshal(selectors)
		got := b.eval(fmt.Sprintf(contrastJS, sel)).([]any)
		if len(got) == 0 {
			t.Errorf("%s: no visible text in %v to check", when, selectors)
		}
		for _, r := range got {
			r := r.(map[string]any)
			if r["ratio"].(float64) < 4.5 {
				t.Errorf("%s: %s %q has contrast %.2f (%s on %s), want at least 4.5", when, r["el"], r["text"], r["ratio"], r["fg"], r["bg"])
			}
		}
	}

	// Without the key: the list's "unauthorized" error in the header,
	// once the key dialog is put away.
	b.do(chromedp.EmulateViewport(1280, 800), chromedp.Navigate(ts.URL+"/"))
	b.wait(`document.getElementById("key-dialog").open && document.getElementById("status").textContent !== ""`)
	b.do(chromedp.Click(chromedp.CSS(`#key-form button[value="cancel"]`)))
	b.wait(`!document.getElementById("key-dialog").open`)
	check("unauthorized", "#status")
	b.shot(artifactsDir(t), "inspector-unauthorized.png", chromedp.CaptureScreenshot())

	b.signIn(ts.URL)
	b.open("seed")
	b.do(
		chromedp.SetValue(chromedp.ID("budget"), "40"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("budget").dispatchEvent(new Event("input"))`),
	)
	b.wait(`document.getElementById("policy").dataset.policy === "token_budget/40" && document.querySelectorAll("#messages .msg.dropped").length === 2`)
	check("dropped messages", ".msg.dropped")
	check("muted texts", ".muted")

	// A budget below what the newest turn needs: the policy's error.
	b.do(
		chromedp.SetValue(chromedp.ID("budget"), "1"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("budget").dispatchEvent(new Event("input"))`),
	)
	b.wait(`!document.getElementById("policy-error").hidden`)
	check("policy error", "#policy-error", ".msg.dropped")
	// The facts' error where it shows.
	b.do(chromedp.Evaluate[chromedp.Void](`Object.assign(document.getElementById("facts-error"), {hidden: false, textContent: "unauthorized: missing API key"})`))
	check("facts error", "#facts-error")
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById("policy").scrollIntoView()`))
	b.shot(artifactsDir(t), "inspector-errors.png", chromedp.CaptureScreenshot())
}

// contrastJS lists, for the visible elements under the selectors (a JSON
// array, formatted in) that hold text of their own, the WCAG 2.x contrast
// ratio of that text against what is behind it. It composes the colours
// itself: each element's background over its parent's, each opacity group
// over what is behind it, from a white canvas up; background images and
// elements placed out of their parent's box are not seen.
const contrastJS = `(() => {
	const rgba = (s) => {
		const m = /rgba?\(([^)]+)\)/.exec(s);
		if (!m) return [0, 0, 0, 0];
		const p = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number);
		return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
	};
	const over = (fg, bg) => [0, 1, 2].map(i => fg[i] * fg[3] + bg[i] * (1 - fg[3])).concat(1);
	const mix = (a, b, o) => [0, 1, 2].map(i => a[i] * o + b[i] * (1 - o)).concat(1);
	const lum = (c) => {
		const [r, g, b] = c.slice(0, 3).map(v => {
			v /= 255;
			return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
		});
		return 0.2126 * r + 0.7152 * g + 0.0722 * b;
	};
	// pixels composes chain[i:] over backdrop: the text's colour and the
	// background under it.
	const pixels = (chain, i, backdrop) => {
		const cs = getComputedStyle(chain[i]);
		const bg = over(rgba(cs.backgroundColor), backdrop);
		let px = i === chain.length - 1 ? { text: over(rgba(cs.color), bg), bg } : pixels(chain, i + 1, bg);
		const o = Number(cs.opacity);
		if (o < 1) px = { text: mix(px.text, backdrop, o), bg: mix(px.bg, backdrop, o) };
		return px;
	};
	const css = (c) => "rgb(" + c.slice(0, 3).map(Math.round).join(", ") + ")";
	const out = [];
	for (const sel of %s) {
		for (const root of document.querySelectorAll(sel)) {
			for (const e of [root, ...root.querySelectorAll("*")]) {
				const own = [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join("").trim();
				if (!own || !e.checkVisibility()) continue;
				const chain = [];
				for (let p = e; p; p = p.parentElement) chain.unshift(p);
				const px = pixels(chain, 0, [255, 255, 255, 1]);
				const [a, b] = [lum(px.text), lum(px.bg)];
				out.push({
					el: e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className && typeof e.className === "string" ? "." + e.className.trim().split(/\s+/).join(".") : ""),
					text: own.slice(0, 40),
					ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05),
					fg: css(px.text),
					bg: css(px.bg),
				});
			}
		}
	}
	return out;
})()`

// inspectorServer starts a server as `chatmem serve` runs it, over SQLite,
// with API keys, the offline summarizer and rule extractor working inside
// Append so the page has a summary and facts to show when the appends
// return, and the conversations the inspector tests open: the seed, one
// holding HTML and tool calls, two of user u-kavya, one in Hindi and Tamil,
// and another tenant's. It skips (fails under CI) without Chromium, and
// returns the server and a client with acme's key.
func inspectorServer(t *testing.T) (*httptest.Server, *client.Client) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		testenv.SkipOrFail(t, "no Chromium at %s (apt-get install chromium; .ci/run installs it): %v", chromiumPath, err)
	}
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
	cl := client.New(ts.URL, acmeKey, ts.Client())
	ctx := t.Context()
	_, err = cl.Append(ctx, "seed", seed.History(), client.AppendOptions{Tokenizer: "estimate"})
	must(t, "Append(seed)", err)
	if _, err := cl.PatchFacts(ctx, "seed", []FactInput{{Key: "name", Value: "Kavya", SourceSeq: 1}}); err != nil {
		t.Fatalf("PatchFacts(seed): %v", err)
	}
	_, err = cl.Append(ctx, "support-html", []chatmem.Message{
		{Role: chatmem.RoleUser, Content: htmlContent},
		{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{{ID: "call_1", Type: "function", Function: chatmem.FunctionCall{Name: "lookup_order", Arguments: `{"order_id":"SE-10423"}`}}}},
		{Role: chatmem.RoleTool, ToolCallID: "call_1", Content: `{"status":"out_for_delivery","eta":"20:00"}`},
		{Role: chatmem.RoleAssistant, Content: "Your order is out for delivery and arrives by 8 pm."},
	}, client.AppendOptions{Tokenizer: "estimate"})
	must(t, "Append(support-html)", err)
	// A user with two conversations: the rule extractor takes her name and
	// email from the first, and a new email from the second supersedes the
	// first email.
	for _, c := range []struct{ id, text string }{
		{"kavya-1", "Hi, my name is Kavya and my email is kavya@example.com."},
		{"kavya-2", "My email is now kavya.rao@example.com, please use that."},
	} {
		_, err = cl.Append(ctx, c.id, []chatmem.Message{{Role: chatmem.RoleUser, Content: c.text}, {Role: chatmem.RoleAssistant, Content: "Noted."}},
			client.AppendOptions{Tokenizer: "estimate", User: "u-kavya"})
		must(t, "Append("+c.id+")", err)
	}
	msgs := make([]chatmem.Message, len(indicTexts))
	for i, text := range indicTexts {
		msgs[i] = chatmem.Message{Role: chatmem.RoleUser, Content: text.content}
		if i%2 == 1 {
			msgs[i].Role = chatmem.RoleAssistant
		}
	}
	_, err = cl.Append(ctx, "support-indic", msgs, client.AppendOptions{Tokenizer: "estimate"})
	must(t, "Append(support-indic)", err)
	// Another tenant's conversation, which the page must never show.
	_, err = client.New(ts.URL, globexKey, ts.Client()).Append(ctx, "globex-only", seed.History()[:1], client.AppendOptions{})
	must(t, "Append(globex-only)", err)
	return ts, cl
}

// indicTexts are the messages of conversation support-indic, in the
// scripts whose fonts .ci/run installs, with the fontconfig language that
// finds a font for each.
var indicTexts = []struct{ lang, content string }{
	{"hi", "नमस्ते, मेरा ऑर्डर SE-10423 अभी तक नहीं आया।"},
	{"hi", "माफ़ कीजिए! आपका ऑर्डर आज रात 8 बजे तक पहुँच जाएगा।"},
	{"ta", "வணக்கம், என் ஆர்டர் இன்னும் வரவில்லை."},
	{"ta", "மன்னிக்கவும்! உங்கள் ஆர்டர் இன்று இரவு 8 மணிக்குள் வரும்."},
}

// artifactsDir is $CHATMEM_ARTIFACTS, made if missing, or a temporary
// directory.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CHATMEM_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// signIn opens the page at url and gives it acme's key when it asks.
func (b *browser) signIn(url string) {
	b.t.Helper()
	b.do(chromedp.EmulateViewport(1280, 800), chromedp.Navigate(url+"/"))
	b.wait(`document.getElementById("key-dialog").open`)
	b.do(
		chromedp.SendKeys(chromedp.ID("key-input"), acmeKey),
		chromedp.Click(chromedp.CSS(`#key-form button[value="save"]`)),
	)
	b.wait(`document.querySelector('#conv-rows button[data-id="seed"]') !== null`)
}

// open opens conversation id from the list and waits for its messages,
// its window and its facts.
func (b *browser) open(id string) {
	b.t.Helper()
	b.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#conv-rows button[data-id=%q]`, id))))
	b.wait(fmt.Sprintf(`document.getElementById("conv-title").textContent === %q && document.querySelectorAll("#messages .msg.kept").length > 0 && document.getElementById("fact-rows").dataset.conv === %q`, id, id))
}

// shot saves a screenshot as name under dir.
func (b *browser) shot(dir, name string, a chromedp.Action[[]byte]) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, a)
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// TestInspectorFiles checks how the page and its files are served: without
// a key even when keys are configured, with their content types and a
// Content-Security-Policy, and with the API's error shape for the rest.
func TestInspectorFiles(t *testing.T) {
	ts := newTestServer(t, newMemory(t, memstore.New(), nil), Options{})
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
