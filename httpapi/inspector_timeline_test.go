package httpapi

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/openai"
)

// TestInspectorTimeline drives a 6-turn conversation through the chat
// proxy (a fake upstream reporting usage with cached and reasoning
// tokens), over SQLite with a usage ledger, prices and an OpenAI
// summarizer (another fake upstream) working inside the appends, then
// opens it in headless Chromium: the timeline has one entry per reply,
// each with the seq ranges its receipt sent, what entered and left the
// window since the turn before (checked against the receipts the API
// gives), the upstream's tokens and their cost at the server's prices,
// and, per hour, the summarizer's calls the ledger counted for the
// conversation. A screenshot goes to $CHATMEM_ARTIFACTS.
func TestInspectorTimeline(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		testenv.SkipOrFail(t, "no Chromium at %s (apt-get install chromium; .ci/run installs it): %v", chromiumPath, err)
	}
	prices, err := chatmem.ParsePrices([]byte(`{"gpt-4o-mini": {"input": 0.15, "cached_input": 0.075, "output": 0.6}}`))
	if err != nil {
		t.Fatal(err)
	}
	sumUp := newFakeUpstream(t)
	sum, err := openai.NewSummarizer(openai.Options{BaseURL: sumUp.URL + "/v1", APIKey: "sk-test", Model: "gpt-4o-mini"})
	if err != nil {
		t.Fatal(err)
	}
	store := openSQLite(t)
	env := newProxyEnv(t, proxyConfig{store: store, policy: chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 60},
		memory: func(o *chatmem.Options) {
			o.Sync = true
			o.Summarizer = sum
			o.Summary.Trigger, o.Summary.Target = 30, 15
			o.Ledger = chatmem.NewLedger(chatmem.LedgerOptions{Store: chatmem.UsageStoreOf(store), Prices: prices})
		}})
	const turns = 6
	for n := 1; n <= turns; n++ {
		if status, _, body := env.post(t, map[string]string{"X-Chatmem-Conversation": "timeline"}, receiptTurn(n)); status != http.StatusOK {
			t.Fatalf("turn %d: status %d: %s", n, status, body)
		}
	}
	status, _, body := env.send(t, http.MethodGet, "/v1/conversations/timeline/receipts", proxyKey, nil, "")
	var page ReceiptsPage
	if status != http.StatusOK || json.Unmarshal(body, &page) != nil || len(page.Receipts) != turns {
		t.Fatalf("GET receipts = %d %s; want %d receipts", status, body, turns)
	}
	// What the timeline must say of each turn, from the API's receipts.
	type want struct{ seq, sent, entered, left string }
	var wants []want
	var prev map[int64]bool
	for _, rec := range page.Receipts {
		sent := map[int64]bool{}
		for _, sp := range rec.Receipt.Sent {
			if sp.Conversation == "" && sp.From > 0 {
				for q := sp.From; q <= sp.To; q++ {
					sent[q] = true
				}
			}
		}
		entered, left := map[int64]bool{}, map[int64]bool{}
		for q := range sent {
			if !prev[q] {
				entered[q] = true
			}
		}
		for q := range prev {
			if !sent[q] {
				left[q] = true
			}
		}
		wants = append(wants, want{strconv.FormatInt(rec.Seq, 10), seqRuns(sent), seqRuns(entered), seqRuns(left)})
		prev = sent
	}
	if wants[0].entered != "#1" || wants[turns-1].left == "" {
		t.Fatalf("receipts: first turn entered %q, last turn left %q; want #1 and a window that slid", wants[0].entered, wants[turns-1].left)
	}

	b := startBrowser(t)
	b.do(chromedp.EmulateViewport(1280, 900), chromedp.Navigate(env.url+"/"))
	b.wait(`document.getElementById("key-dialog").open`)
	b.do(
		chromedp.SendKeys(chromedp.ID("key-input"), proxyKey),
		chromedp.Click(chromedp.CSS(`#key-form button[value="save"]`)),
	)
	b.wait(`document.querySelector('#conv-rows button[data-id="timeline"]') !== null`)
	b.do(chromedp.Click(chromedp.CSS(`#conv-rows button[data-id="timeline"]`)))
	b.wait(`document.getElementById("timeline").dataset.conv === "timeline"`)

	got := b.eval(`[...document.querySelectorAll("#timeline .turn")].map(e => [e.dataset.seq, e.dataset.sent, e.dataset.entered, e.dataset.left, e.dataset.input, e.dataset.cached, e.dataset.output, e.dataset.cost, e.textContent])`).([]any)
	if len(got) != turns {
		t.Fatalf("the timeline has %d turns, want %d", len(got), turns)
	}
	for i, g := range got {
		f := g.([]any)
		w := wants[i]
		if f[0] != w.seq || f[1] != w.sent || f[2] != w.entered || f[3] != w.left {
			t.Errorf("turn %d: seq %v, sent %q, entered %q, left %q; want %s, %q, %q, %q", i+1, f[0], f[1], f[2], f[3], w.seq, w.sent, w.entered, w.left)
		}
		if f[4] != "42" || f[5] != "32" || f[6] != "7" {
			t.Errorf("turn %d: tokens in %v (cached %v), out %v; want 42 (32), 7", i+1, f[4], f[5], f[6])
		}
		// (42-32)×0.15 + 32×0.075 + (7-3)×0.6 + 3×0.6 (reasoning at the output price), per million.
		if c, err := strconv.ParseFloat(f[7].(string), 64); err != nil || math.Abs(c-8.1e-6) > 1e-12 {
			t.Errorf("turn %d: cost %q, want 8.1e-06", i+1, f[7])
		}
		text := f[8].(string)
		for _, s := range []string{"42 in (32 cached)", "7 out (3 reasoning)", "cost 0.0000081", "Turn " + strconv.Itoa(i+1)} {
			if !strings.Contains(text, s) {
				t.Errorf("turn %d shows %q; want it to say %q", i+1, text, s)
			}
		}
	}
	// The summarizer's calls, counted by the ledger in the hour of the turns.
	hours := b.eval(`[...document.querySelectorAll("#timeline .hour")].map(e => [e.dataset.summarize || "", e.textContent])`).([]any)
	if len(hours) == 0 {
		t.Fatal("the timeline has no hour heading")
	}
	summarize := 0
	for _, h := range hours {
		n, _ := strconv.Atoi(h.([]any)[0].(string))
		summarize += n
	}
	if reqs := len(sumUp.requests()); summarize != reqs || reqs == 0 {
		t.Errorf("the timeline's hours show %d summarize calls; the summarizer made %d (want as many, and some): %v", summarize, reqs, hours)
	}
	if p := b.text("#timeline-prices"); !strings.Contains(p, "gpt-4o-mini") {
		t.Errorf("prices note %q, want the priced model named", p)
	}
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById("timeline-panel").scrollIntoView()`))
	b.shot(artifactsDir(t), "inspector-timeline.png", chromedp.Screenshot(chromedp.ID("timeline-panel")))

	// A long conversation: the timeline reads the receipts of its newest
	// 8,000 messages only, and says so.
	if b.eval(`document.getElementById("timeline-span").hidden`) != true {
		t.Errorf("a short conversation's timeline says it shows only part: %q", b.text("#timeline-span"))
	}
	for i := 0; i < 8; i++ {
		batch := make([]chatmem.Message, 1000)
		for j := range batch {
			batch[j] = chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("filler %d", i*1000+j)}
			if j%2 == 1 {
				batch[j].Role = chatmem.RoleAssistant
			}
		}
		if _, err := env.mem.Append(t.Context(), chatmem.Key{Tenant: "acme", ID: "timeline"}, batch, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	last := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"and now?"}]}` // only the new message
	if status, _, body := env.post(t, map[string]string{"X-Chatmem-Conversation": "timeline"}, last); status != http.StatusOK {
		t.Fatalf("turn %d: status %d: %s", turns+1, status, body)
	}
	b.do(chromedp.Navigate(env.url + "/"))
	b.wait(`document.querySelector('#conv-rows button[data-id="timeline"]') !== null`)
	b.do(chromedp.Click(chromedp.CSS(`#conv-rows button[data-id="timeline"]`)))
	b.wait(`document.getElementById("timeline").dataset.conv === "timeline"`)
	seqs := b.eval(`[...document.querySelectorAll("#timeline .turn")].map(e => e.dataset.seq)`).([]any)
	if want := strconv.Itoa(2*turns + 8000 + 2); len(seqs) != 1 || seqs[0] != want {
		t.Errorf("the long conversation's timeline shows the turns at %v, want only the newest, at %s", seqs, want)
	}
	if heads := b.eval(`[...document.querySelectorAll("#timeline .hour")].map(e => e.dataset.hour)`).([]any); len(heads) != 1 || heads[0] == "" {
		t.Errorf("the long conversation's newest turn is under the hours %v, want the hour its reply was stored in (the page loads only the oldest messages)", heads)
	}
	if b.eval(`document.getElementById("timeline-span").hidden`) != false {
		t.Error("the long conversation's timeline does not show that it shows only part of it")
	}
	if span := b.text("#timeline-span"); !strings.Contains(span, "newest 8,000 messages") {
		t.Errorf("the long conversation's timeline says %q, want it to say it shows the newest 8,000 messages", span)
	}
	if p := b.problems(); len(p) > 0 {
		t.Errorf("page problems: %v", p)
	}
}

// seqRuns writes a set of seqs as the timeline does: "#1–#4, #7".
func seqRuns(set map[int64]bool) string {
	var out string
	for q := int64(1); q <= 1000; q++ {
		if !set[q] || set[q-1] {
			continue
		}
		end := q
		for set[end+1] {
			end++
		}
		if out != "" {
			out += ", "
		}
		if end == q {
			out += fmt.Sprintf("#%d", q)
		} else {
			out += fmt.Sprintf("#%d–#%d", q, end)
		}
	}
	return out
}
