// chatmem inspector: a single page over the public REST API. Every piece of
// data from the server is put into the page with textContent or as an
// attribute value, never parsed as HTML.

const PAGE_SIZE = 20;          // conversations per list page
const MESSAGE_PAGE = 1000;     // messages per request (the API's maximum)
const MESSAGE_CAP = 5000;      // messages loaded before "Load more"
const DEBOUNCE_MS = 120;       // slider and inputs to context request
const KEY_STORE = "chatmem.apiKey";
const SVG = "http://www.w3.org/2000/svg";

const $ = (id) => document.getElementById(id);

const state = {
  key: sessionStorage.getItem(KEY_STORE) || "",
  cursors: [""],       // after= of each list page seen, for Previous
  page: 0,
  listNext: "",
  rows: [],            // conversations of the current list page
  conv: null,          // the open conversation
  user: null,          // the open user's ID
  userNext: "",        // after= of the user's next page of conversations
  messages: [],
  nextAfter: null,
  window: null,        // the last context answer
  ctxAbort: null,
  ctxTimer: 0,
  askedKey: false,
};

// APIError is an error answer of the REST API.
class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// api calls the REST API with the session's key and returns the decoded
// JSON (null for 204). Error answers throw an APIError.
async function api(method, path, { query, body, signal } = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, String(v));
  }
  const headers = { Accept: "application/json" };
  if (state.key) headers.Authorization = "Bearer " + state.key;
  const init = { method, headers, signal };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(url, init);
  if (resp.status === 204) return null;
  let data = null;
  try {
    data = await resp.json();
  } catch {
    data = null;
  }
  if (!resp.ok) {
    const e = (data && data.error) || {};
    if (resp.status === 401) askKey(true);
    throw new APIError(resp.status, e.code || "http_" + resp.status, e.message || resp.statusText);
  }
  return data;
}

function convPath(id, sub) {
  return "/v1/conversations/" + encodeURIComponent(id) + (sub ? "/" + sub : "");
}

function userPath(id, sub) {
  return "/v1/users/" + encodeURIComponent(id) + (sub ? "/" + sub : "");
}

// The page's addresses: a conversation (#/c/ID, or #/c/ID/SEQ to show one
// of its messages) and a user (#/u/ID).
const convHash = (id, seq) => "#/c/" + encodeURIComponent(id) + (seq ? "/" + seq : "");
const userHash = (id) => "#/u/" + encodeURIComponent(id);

// el makes an element with a class, text and children; text is always set
// as textContent.
function el(tag, { cls, text, attrs } = {}, ...children) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) if (c) e.append(c);
  return e;
}

function setStatus(text, isError) {
  const s = $("status");
  s.textContent = text;
  s.classList.toggle("error", !!isError);
}

function showError(id, err) {
  const p = $(id);
  if (!err) {
    p.hidden = true;
    p.textContent = "";
    return;
  }
  p.hidden = false;
  p.textContent = err instanceof APIError ? `${err.code}: ${err.message}` : String(err.message || err);
}

const numberFmt = new Intl.NumberFormat("en");
const fmtNum = (n) => numberFmt.format(n || 0);

function fmtTime(s) {
  if (!s) return "";
  const d = new Date(s);
  return isNaN(d) ? s : d.toLocaleString("en-GB", { dateStyle: "medium", timeStyle: "medium" });
}

function fmtAgo(s) {
  const d = new Date(s);
  if (isNaN(d)) return "";
  const sec = Math.round((Date.now() - d.getTime()) / 1000);
  if (sec < 60) return "just now";
  if (sec < 3600) return Math.floor(sec / 60) + " min ago";
  if (sec < 86400) return Math.floor(sec / 3600) + " h ago";
  if (sec < 30 * 86400) return Math.floor(sec / 86400) + " d ago";
  return d.toLocaleDateString("en-GB", { dateStyle: "medium" });
}

// ---- API key ----------------------------------------------------------

function askKey(auto) {
  if (auto && state.askedKey) return;
  state.askedKey = true;
  const d = $("key-dialog");
  if (d.open) return;
  $("key-input").value = state.key;
  d.showModal();
}

function initKey() {
  $("key-button").addEventListener("click", () => askKey(false));
  $("key-dialog").addEventListener("close", () => {
    const v = $("key-dialog").returnValue;
    if (v === "save") {
      state.key = $("key-input").value.trim();
      sessionStorage.setItem(KEY_STORE, state.key);
    } else if (v === "clear") {
      state.key = "";
      sessionStorage.removeItem(KEY_STORE);
    } else {
      return;
    }
    $("key-input").value = "";
    state.askedKey = false;
    updateKeyButton();
    loadList();
    if (state.conv) openConversation(state.conv.id);
  });
  updateKeyButton();
}

function updateKeyButton() {
  $("key-button").textContent = state.key ? "API key ✓" : "API key";
}

// ---- conversation list ------------------------------------------------

async function loadList() {
  try {
    const page = await api("GET", "/v1/conversations", {
      query: { after: state.cursors[state.page], limit: PAGE_SIZE },
    });
    state.rows = page.conversations;
    state.listNext = page.next;
    renderList();
    setStatus("");
  } catch (err) {
    state.rows = [];
    renderList();
    setStatus("Could not list conversations: " + err.message, true);
  }
}

function renderList() {
  const filter = $("search").value.trim().toLowerCase();
  const rows = state.rows.filter((c) => !filter || c.id.toLowerCase().includes(filter));
  $("conv-rows").replaceChildren(...rows.map(convRow));
  $("list-empty").hidden = rows.length > 0;
  $("list-empty").textContent = filter && state.rows.length ? "No ID on this page contains that text; press Open to look it up." : "No conversations.";
  $("prev-page").disabled = state.page === 0;
  $("next-page").disabled = !state.listNext;
  $("page-label").textContent = "Page " + (state.page + 1);
}

// convRow is a conversation's row in a list: its ID, which opens it, its
// messages, tokens and last activity.
function convRow(c) {
  const open = el("button", { cls: "link", text: c.id, attrs: { type: "button", "data-id": c.id } });
  open.addEventListener("click", () => go(c.id));
  if (state.conv && state.conv.id === c.id) open.setAttribute("aria-current", "true");
  const when = el("time", { text: fmtAgo(c.updated_at), attrs: { datetime: c.updated_at, title: fmtTime(c.updated_at) } });
  return el(
    "tr",
    {},
    el("td", { cls: "id" }, open),
    el("td", { cls: "num", text: fmtNum(c.last_seq) }),
    el("td", { cls: "num", text: fmtNum(c.tokens + c.system_tokens) }),
    el("td", {}, when),
  );
}

function initList() {
  $("user-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const id = $("user-input").value.trim();
    if (id) location.hash = userHash(id);
  });
  $("search").addEventListener("input", renderList);
  $("search-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const id = $("search").value.trim();
    if (id) go(id);
  });
  $("prev-page").addEventListener("click", () => {
    if (state.page > 0) {
      state.page--;
      loadList();
    }
  });
  $("next-page").addEventListener("click", () => {
    if (!state.listNext) return;
    state.cursors[state.page + 1] = state.listNext;
    state.page++;
    loadList();
  });
}

// ---- conversation -----------------------------------------------------

// go shows conversation id; the hash keeps it across reloads and history.
function go(id, seq) {
  const h = convHash(id, seq);
  if (location.hash === h) openConversation(id, seq);
  else location.hash = h;
}

function route() {
  const c = /^#\/c\/([^/]+)(?:\/(\d+))?$/.exec(location.hash);
  const u = /^#\/u\/([^/]+)$/.exec(location.hash);
  if (c) {
    openConversation(decodeURIComponent(c[1]), c[2] ? Number(c[2]) : 0);
  } else if (u) {
    closeConversation();
    openUser(decodeURIComponent(u[1]));
  } else {
    closeConversation();
    closeUser();
  }
}

function closeConversation() {
  if (state.ctxAbort) state.ctxAbort.abort();
  state.conv = null;
  state.messages = [];
  state.window = null;
  $("conversation").hidden = true;
  $("placeholder").hidden = false;
  renderList();
}

// openConversation shows conversation id and, if seq is set, brings that
// message into view.
async function openConversation(id, seq) {
  if (state.ctxAbort) state.ctxAbort.abort();
  closeUser();
  let conv;
  try {
    conv = await api("GET", convPath(id));
  } catch (err) {
    setStatus(err.status === 404 ? `No conversation "${id}".` : "Could not open " + id + ": " + err.message, true);
    closeConversation();
    return;
  }
  const changed = !state.conv || state.conv.id !== conv.id;
  state.conv = conv;
  state.messages = [];
  state.nextAfter = null;
  state.window = null;
  setStatus("");
  $("placeholder").hidden = true;
  $("conversation").hidden = false;
  renderHeader();
  renderList();
  try {
    await loadMessages();
  } catch (err) {
    setStatus("Could not read messages: " + err.message, true);
  }
  if (changed) setupBudget();
  renderMessages();
  refreshContext();
  loadSummary();
  loadFacts();
  drawChart();
  loadTimeline();
  if (seq) showMessage(seq);
  else if (changed) $("main").focus({ preventScroll: true });
}

function renderHeader() {
  const c = state.conv;
  $("conv-title").textContent = c.id;
  const parts = [
    `${fmtNum(c.last_seq)} messages`,
    `${fmtNum(c.turns)} turns`,
    `${fmtNum(c.tokens + c.system_tokens)} tokens (${fmtNum(c.system_tokens)} system)`,
    `tokenizer ${c.tokenizer}`,
    `last activity ${fmtTime(c.updated_at)}`,
  ];
  if (c.expires_at) parts.push(`expires ${fmtTime(c.expires_at)}`);
  $("conv-meta").textContent = parts.join(" · ");
  $("conv-user").hidden = !c.user;
  $("conv-user-link").textContent = c.user || "";
  $("conv-user-link").href = c.user ? userHash(c.user) : "#";
}

// loadMessages reads the conversation's messages, up to MESSAGE_CAP at a
// time.
async function loadMessages() {
  const id = state.conv.id;
  let loaded = 0;
  do {
    const page = await api("GET", convPath(id, "messages"), {
      query: { after: state.nextAfter || undefined, limit: MESSAGE_PAGE },
    });
    if (!state.conv || state.conv.id !== id) return;
    state.messages.push(...page.messages);
    loaded += page.messages.length;
    state.nextAfter = page.next_after;
  } while (state.nextAfter !== null && loaded < MESSAGE_CAP);
  $("more-messages").hidden = state.nextAfter === null;
}

// PROXY_BUDGET is the budget `chatmem serve` gives a proxied request that
// names none (--proxy-budget's default).
const PROXY_BUDGET = 4000;
// REPLY_OVERHEAD is the most a tokenizer adds once per request (the
// tiktoken ones' reply priming); the estimate adds none.
const REPLY_OVERHEAD = 3;

// setupBudget sizes the slider to the conversation, from 1 to a quarter
// over everything (room for another tokenizer's counts), and starts it at
// defaultBudget.
function setupBudget() {
  const c = state.conv;
  const total = c.tokens + c.system_tokens;
  const max = Math.max(10, Math.ceil((total * 1.25 + 8) / 10) * 10);
  const b = $("budget");
  b.max = String(max);
  b.value = String(Math.min(max, defaultBudget(total)));
  $("budget-out").textContent = b.value;
}

// defaultBudget is where the slider starts, so that the page opens on the
// policy at work rather than on everything sent: the proxy's default budget
// when the conversation is over it (what a request that names no budget
// gets), else a quarter of the conversation, rounded to a step; never less
// than the newest turn needs, which every window sends.
function defaultBudget(total) {
  const b = total > PROXY_BUDGET ? PROXY_BUDGET : roundStep(total / 4);
  return Math.max(b, newestTurnTokens());
}

// roundStep rounds v to a step of 5 in its second digit (5, 10, 15 ...
// 50, 100, 150 ... 500, 1000 ...), and never to 0.
function roundStep(v) {
  const step = Math.max(1, 5 * Math.pow(10, Math.floor(Math.log10(Math.max(v, 1))) - 1));
  return Math.max(step, Math.round(v / step) * step);
}

// newestTurnTokens is what the newest user message and what follows it
// take, with the pinned system messages and a request's overhead.
function newestTurnTokens() {
  let sys = 0;
  let tail = 0;
  let turn = 0;
  for (const m of state.messages) {
    if (m.role === "system") {
      sys += m.tokens || 0;
      continue;
    }
    if (m.role === "user") turn = 0;
    turn += m.tokens || 0;
    tail = turn;
  }
  return sys + tail + REPLY_OVERHEAD;
}

function renderMessages() {
  const list = $("messages");
  const msgs = state.messages;
  const items = [];
  for (let i = 0; i < msgs.length; i++) {
    const m = msgs[i];
    if (m.role === "assistant" && m.tool_calls && m.tool_calls.length) {
      // A call and the results that answer it, shown (and sent) together.
      const ids = new Set(m.tool_calls.map((c) => c.id));
      const group = [messageItem(m, null)];
      while (i + 1 < msgs.length && msgs[i + 1].role === "tool" && ids.has(msgs[i + 1].tool_call_id)) {
        i++;
        group.push(messageItem(msgs[i], m));
      }
      const names = m.tool_calls.map((c) => c.function.name).join(", ");
      items.push(
        el(
          "li",
          { cls: "tool-pair", attrs: { "aria-label": "Tool call and results: " + names } },
          el("p", { cls: "pair-label", text: `tool call${m.tool_calls.length > 1 ? "s" : ""}: ${names}` }),
          el("ol", { cls: "pair" }, ...group.map((g) => el("li", {}, g))),
        ),
      );
      continue;
    }
    items.push(el("li", {}, messageItem(m, null)));
  }
  list.replaceChildren(...items);
  applyWindow();
}

function messageItem(m, call) {
  const head = el(
    "header",
    { cls: "msg-head" },
    el("span", { cls: "role role-" + m.role, text: m.role }),
    el("span", { cls: "seq", text: "#" + m.seq }),
    el("span", { cls: "tok", text: fmtNum(m.tokens) + " tok" }),
    el("time", { text: fmtTime(m.created_at), attrs: { datetime: m.created_at || "" } }),
    el("span", { cls: "state" }),
  );
  if (m.name) head.append(el("span", { cls: "name", text: m.name }));
  const item = el("article", { cls: "msg role-" + m.role, attrs: { id: "m-" + m.seq, "data-seq": String(m.seq), tabindex: "-1" } }, head);
  if (m.role === "tool") {
    const c = call && call.tool_calls.find((tc) => tc.id === m.tool_call_id);
    item.append(el("p", { cls: "result-of", text: `result of ${c ? c.function.name : "call"} (${m.tool_call_id})` }));
  }
  if (m.content) item.append(el("div", { cls: "content", text: m.content }));
  for (const tc of m.tool_calls || []) {
    item.append(
      el(
        "div",
        { cls: "call" },
        el("span", { cls: "call-name", text: tc.function.name }),
        el("code", { cls: "call-args", text: tc.function.arguments || "" }),
        el("span", { cls: "call-id muted", text: tc.id }),
      ),
    );
  }
  return item;
}

function initConversation() {
  $("more-messages").addEventListener("click", async () => {
    try {
      await loadMessages();
    } catch (err) {
      setStatus("Could not read messages: " + err.message, true);
    }
    renderMessages();
    drawChart();
  });
  $("delete-conv").addEventListener("click", () => {
    $("confirm-text").textContent = `This deletes "${state.conv.id}" with its ${fmtNum(state.conv.last_seq)} messages, summary and facts. It cannot be undone.`;
    $("confirm-dialog").showModal();
  });
  $("confirm-dialog").addEventListener("close", async () => {
    if ($("confirm-dialog").returnValue !== "delete" || !state.conv) return;
    const id = state.conv.id;
    try {
      await api("DELETE", convPath(id));
      setStatus(`Deleted "${id}".`);
      history.replaceState(null, "", location.pathname);
      closeConversation();
      loadList();
      $("search").focus();
    } catch (err) {
      setStatus("Could not delete: " + err.message, true);
    }
  });
}

// ---- policy and context -----------------------------------------------

// controlsOf says which controls a policy takes (policy.go): all sends
// everything and ignores a budget; last_turns takes turns and, if asked,
// a budget that caps them; the others need a budget; recall, and
// summary_buffer with recall, take the recent share and the recall scope.
function controlsOf(kind, recall) {
  const recalls = kind === "recall" || (kind === "summary_buffer" && recall);
  return {
    budget: kind !== "all",
    cap: kind === "last_turns",
    turns: kind === "last_turns",
    recall: kind === "summary_buffer",
    recent: recalls,
    scope: recalls,
  };
}

function policyParams() {
  const kind = $("policy-kind").value;
  const on = controlsOf(kind, $("recall").checked);
  const q = { policy: kind };
  if (on.budget && (!on.cap || $("budget-cap").checked)) q.budget = $("budget").value;
  if (on.turns) q.turns = Math.max(1, parseInt($("turns").value, 10) || 1);
  if (on.recall && $("recall").checked) q.recall = "true";
  const recent = parseInt($("recent").value, 10);
  if (on.recent && recent > 0) q.recent = recent;
  if (on.scope && $("scope").value) q.scope = $("scope").value;
  if ($("with-facts").checked) q.facts = "true";
  if ($("tokenizer").value) q.tokenizer = $("tokenizer").value;
  return q;
}

// syncControls shows the controls the chosen policy takes and hides the
// others.
function syncControls() {
  const kind = $("policy-kind").value;
  const on = controlsOf(kind, $("recall").checked);
  for (const [name, shown] of Object.entries(on)) $("field-" + name).hidden = !shown;
  const budgeted = on.budget && (!on.cap || $("budget-cap").checked);
  $("budget").disabled = !budgeted;
  $("budget-out").textContent = budgeted ? $("budget").value : "–";
  const share = kind === "recall" ? "a tenth" : "half";
  $("recent").placeholder = `${share} of the budget`;
  const user = state.conv && state.conv.user;
  $("scope").querySelector('option[value="user"]').disabled = !user;
  if (!user) $("scope").value = "";
}

function scheduleContext() {
  syncControls();
  clearTimeout(state.ctxTimer);
  state.ctxTimer = setTimeout(refreshContext, DEBOUNCE_MS);
}

async function refreshContext() {
  if (!state.conv) return;
  clearTimeout(state.ctxTimer);
  if (state.ctxAbort) state.ctxAbort.abort();
  const ctl = new AbortController();
  state.ctxAbort = ctl;
  syncControls();
  const params = policyParams();
  try {
    // A preview: what the page shows must not change the budget the
    // conversation's summaries follow, nor make or queue a summary.
    const query = { ...params, preview: "true" };
    const w = await api("GET", convPath(state.conv.id, "context"), { query, signal: ctl.signal });
    if (ctl.signal.aborted) return;
    state.window = w;
    showError("policy-error", null);
  } catch (err) {
    if (ctl.signal.aborted || err.name === "AbortError") return;
    state.window = null;
    showError("policy-error", err);
  }
  // What the page shows now, for tests to wait on: policy/budget or turns.
  $("policy").dataset.policy = params.policy + "/" + (params.budget || params.turns || "");
  $("policy").dataset.query = new URLSearchParams(params).toString();
  applyWindow();
  drawChart();
}

// applyWindow marks the messages the window sends and fills in the totals.
function applyWindow() {
  const w = state.window;
  const kept = new Set();
  if (w) for (const m of w.messages) if (m.seq) kept.add(m.seq);
  for (const item of $("messages").querySelectorAll(".msg")) {
    const sent = kept.has(Number(item.dataset.seq));
    item.classList.toggle("kept", !!w && sent);
    item.classList.toggle("dropped", !w || !sent);
    item.querySelector(".state").textContent = w ? (sent ? "sent" : "dropped") : "";
  }
  const set = (id, v) => ($(id).textContent = w ? fmtNum(v) : "–");
  set("total-kept", kept.size);
  set("total-dropped", w && w.dropped);
  set("total-tokens", w && w.tokens);
  for (const p of ["system", "facts", "summary", "recent", "overhead"]) set("part-" + p, w && w.parts[p]);
  const extra = [];
  if (w && w.summary) extra.push(`Sends the summary of messages 1–${w.summary.covers_seq} (${fmtNum(w.parts.summary)} tokens) before the window.`);
  const recalled = w ? w.messages.filter((m) => m.metadata && m.metadata.chatmem === "recalled").length : 0;
  if (recalled) extra.push(`Recalls ${recalled} older message${recalled > 1 ? "s" : ""} (${fmtNum(w.parts.recalled)} tokens).`);
  if (w && w.facts && w.facts.length) extra.push(`Sends ${w.facts.length} fact${w.facts.length > 1 ? "s" : ""} as a system message (${fmtNum(w.parts.facts)} tokens).`);
  $("window-extra").textContent = extra.join(" ");
}

function initPolicy() {
  for (const id of ["budget", "turns", "recent"]) $(id).addEventListener("input", scheduleContext);
  for (const id of ["policy-kind", "tokenizer", "with-facts", "budget-cap", "recall", "scope"]) $(id).addEventListener("change", scheduleContext);
  syncControls();
}

// ---- summary and facts ------------------------------------------------

async function loadSummary() {
  const id = state.conv.id;
  try {
    const s = await api("GET", convPath(id, "summary"));
    if (!state.conv || state.conv.id !== id) return;
    $("summary-meta").textContent = `Covers messages 1–${s.covers_seq} · ${fmtNum(s.tokens)} tokens · by ${s.summarizer} · ${fmtTime(s.created_at)}`;
    $("summary-text").textContent = s.text;
  } catch (err) {
    if (!state.conv || state.conv.id !== id) return;
    $("summary-meta").textContent = err.status === 404 ? "No summary yet: the conversation is below the summarizer's trigger, or none is configured." : "Could not read the summary: " + err.message;
    $("summary-text").textContent = "";
  }
}

// loadFacts shows the facts a turn of the conversation sees (as
// chatmem.Memory.VisibleFacts gives them): its own, and its user's current
// ones when it has a user.
async function loadFacts() {
  const id = state.conv.id;
  const user = state.conv.user || "";
  const [own, theirs] = await Promise.allSettled([
    api("GET", convPath(id, "facts")),
    user ? api("GET", userPath(user, "facts")) : Promise.resolve({ facts: [] }),
  ]);
  if (!state.conv || state.conv.id !== id) return;
  const failed = [own, theirs].find((r) => r.status === "rejected");
  renderFacts(own.status === "fulfilled" ? own.value.facts : [], theirs.status === "fulfilled" ? theirs.value.facts : [], user);
  showError("facts-error", failed ? failed.reason : null);
  $("fact-rows").dataset.conv = id; // whose facts show now, for tests to wait on
}

// renderFacts lists the conversation's facts and its user's by key, the
// conversation's first. A user's fact on a key the conversation also has
// is not sent: the conversation's value wins.
function renderFacts(own, theirs, user) {
  const ownKeys = new Set(own.map((f) => f.key));
  const rows = [
    ...own.map((f) => ({ f, scope: "conversation", sent: true })),
    ...theirs.map((f) => ({ f, scope: "user", sent: !ownKeys.has(f.key) })),
  ];
  rows.sort((a, b) => (a.f.key < b.f.key ? -1 : a.f.key > b.f.key ? 1 : a.scope === "conversation" ? -1 : 1));
  $("fact-rows").replaceChildren(...rows.map((r) => factRow(r.f, r.scope, r.sent, user)));
  $("facts-empty").hidden = rows.length > 0;
}

// factPath is where a fact of scope is set and deleted.
function factPath(scope, user) {
  return scope === "user" ? userPath(user, "facts") : convPath(state.conv.id, "facts");
}

function factRow(f, scope, sent, user) {
  const value = el("td", { cls: "value", text: f.value });
  if (!sent) value.append(el("span", { cls: "overridden", text: "not sent: the conversation's value wins" }));
  // Where the fact came from: its source message, if any, and who set it.
  const from = el("td", { cls: "from", attrs: { title: `confidence ${f.confidence} · ${fmtTime(f.created_at)}` } });
  if (f.source_seq && scope === "conversation") {
    const b = el("button", { cls: "link", text: "#" + f.source_seq, attrs: { type: "button", "aria-label": "Show message " + f.source_seq } });
    b.addEventListener("click", () => showMessage(f.source_seq));
    from.append(b, document.createTextNode(" · "));
  } else if (scope === "user" && f.conversation) {
    from.append(msgLink(f.conversation, f.source_seq), document.createTextNode(" · "));
  }
  from.append(el("span", { cls: "set-by", text: f.set_by }));
  const of = scope === "user" ? `${f.key} of user ${user}` : f.key;
  const edit = el("button", { text: "Edit", attrs: { type: "button", "aria-label": "Edit " + of, "data-action": "edit" } });
  const del = el("button", { cls: "danger", text: "Delete", attrs: { type: "button", "aria-label": "Delete " + of, "data-action": "delete" } });
  const row = el(
    "tr",
    { cls: sent ? "" : "not-sent", attrs: { "data-key": f.key, "data-scope": scope, "data-sent": String(sent) } },
    el("td", { cls: "key" }, el("code", { text: f.key }), el("span", { cls: "scope scope-" + scope, text: scope, attrs: { title: scope + " fact" } })),
    value,
    from,
    el("td", { cls: "fact-actions" }, edit, del),
  );
  edit.addEventListener("click", () => editFact(row, f, scope, user));
  del.addEventListener("click", () => deleteFact(f.key, scope, user));
  return row;
}

function editFact(row, f, scope, user) {
  const cell = row.querySelector(".value");
  const input = el("input", { attrs: { "aria-label": "New value of " + f.key, maxlength: "4096", "data-role": "fact-value" } });
  input.value = f.value;
  const save = el("button", { cls: "primary", text: "Save", attrs: { type: "submit" } });
  const cancel = el("button", { text: "Cancel", attrs: { type: "button" } });
  const form = el("form", { cls: "inline-edit" }, input, save, cancel);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    setFact(f.key, input.value, scope, user);
  });
  cancel.addEventListener("click", () => loadFacts());
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape") loadFacts();
  });
  cell.replaceChildren(form);
  input.focus();
  input.select();
}

async function setFact(key, value, scope = "conversation", user = "") {
  try {
    await api("PATCH", factPath(scope, user), { body: { facts: [{ key, value }] } });
    showError("facts-error", null);
    setStatus(scope === "user" ? `Fact ${key} of user ${user} set.` : `Fact ${key} set.`);
    if ($("with-facts").checked) refreshContext();
  } catch (err) {
    showError("facts-error", err);
    return;
  }
  loadFacts();
}

async function deleteFact(key, scope = "conversation", user = "") {
  try {
    await api("DELETE", factPath(scope, user), { query: { key } });
    setStatus(scope === "user" ? `Fact ${key} of user ${user} deleted.` : `Fact ${key} deleted.`);
    showError("facts-error", null);
  } catch (err) {
    showError("facts-error", err);
  }
  loadFacts();
  if ($("with-facts").checked) refreshContext();
}

function showMessage(seq) {
  const m = $("m-" + seq);
  if (!m) return;
  m.scrollIntoView({ block: "center" });
  m.focus({ preventScroll: true });
}

function initFacts() {
  $("fact-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    await setFact($("fact-key").value.trim(), $("fact-value").value);
    $("fact-key").value = "";
    $("fact-value").value = "";
  });
}

// ---- user -------------------------------------------------------------

function closeUser() {
  state.user = null;
  $("user-view").hidden = true;
}

// openUser shows a user: their conversations, a page at a time, and every
// value each of their facts has had. A user the store holds nothing of
// shows empty lists, as the API answers.
async function openUser(id) {
  state.user = id;
  state.userNext = "";
  $("placeholder").hidden = true;
  $("user-view").hidden = false;
  $("user-title").textContent = "User " + id;
  $("user-meta").textContent = "";
  $("user-conv-rows").replaceChildren();
  $("user-fact-rows").replaceChildren();
  showError("user-error", null);
  setStatus("");
  try {
    const [page, { facts }] = await Promise.all([
      api("GET", "/v1/conversations", { query: { user: id, limit: PAGE_SIZE } }),
      api("GET", userPath(id, "facts"), { query: { history: "true" } }),
    ]);
    if (state.user !== id) return;
    renderUserFacts(facts);
    addUserConversations(page);
  } catch (err) {
    if (state.user !== id) return;
    showError("user-error", err);
  }
  $("user-view").dataset.user = id; // what the page shows now, for tests to wait on
  $("main").focus({ preventScroll: true });
}

function addUserConversations(page) {
  $("user-conv-rows").append(...page.conversations.map(convRow));
  state.userNext = page.next || "";
  const n = $("user-conv-rows").children.length;
  $("user-convs-empty").hidden = n > 0;
  $("user-more").hidden = !state.userNext;
  $("user-meta").textContent = `${n}${state.userNext ? "+" : ""} conversation${n === 1 ? "" : "s"}`;
}

async function moreUserConversations() {
  const id = state.user;
  try {
    const page = await api("GET", "/v1/conversations", { query: { user: id, after: state.userNext, limit: PAGE_SIZE } });
    if (state.user === id) addUserConversations(page);
  } catch (err) {
    showError("user-error", err);
  }
}

// renderUserFacts shows the history the API gives, oldest first, grouped
// by key: each key's values in order, the last of them current.
function renderUserFacts(facts) {
  const byKey = new Map();
  for (const f of facts) {
    if (!byKey.has(f.key)) byKey.set(f.key, []);
    byKey.get(f.key).push(f);
  }
  const rows = [];
  for (const key of [...byKey.keys()].sort()) {
    for (const f of byKey.get(key)) rows.push(userFactRow(f));
  }
  $("user-fact-rows").replaceChildren(...rows);
  $("user-facts-empty").hidden = rows.length > 0;
}

// msgLink links to a message of a conversation (seq 0: to the
// conversation).
function msgLink(conv, seq) {
  const text = seq ? `${conv} #${seq}` : conv;
  return el("a", { text, attrs: { href: convHash(conv, seq), "data-conv": conv, "data-seq": String(seq || 0) } });
}

function userFactRow(f) {
  const current = !f.valid_to;
  const said = el("td", { cls: "said" });
  if (f.conversation) said.append(msgLink(f.conversation, f.source_seq), document.createTextNode(" · "));
  said.append(el("span", { cls: "set-by", text: f.set_by }));
  const to = el("td", { cls: "valid-to" });
  if (current) to.textContent = "current";
  else to.append(el("time", { text: fmtTime(f.valid_to), attrs: { datetime: f.valid_to } }));
  const by = el("td", { cls: "superseded-by" });
  const s = f.superseded_by;
  if (s && s.conversation) by.append(msgLink(s.conversation, s.seq));
  else if (!current) by.textContent = "the app";
  return el(
    "tr",
    { cls: current ? "current" : "superseded", attrs: { "data-key": f.key, "data-state": current ? "current" : "superseded" } },
    el("td", { cls: "key" }, el("code", { text: f.key })),
    el("td", { cls: "value", text: f.value }),
    said,
    el("td", { cls: "valid-from" }, el("time", { text: fmtTime(f.valid_from || f.created_at), attrs: { datetime: f.valid_from || f.created_at } })),
    to,
    by,
  );
}

function initUser() {
  $("user-more").addEventListener("click", moreUserConversations);
}

// ---- timeline of turns as sent ----------------------------------------

const RECEIPT_CAP = 2000;  // receipts loaded for the timeline (the newest kept)
const RECEIPT_SPAN = 8000; // newest messages whose receipts are read: a long conversation's are not all
const HOUR_CAP = 48;       // hours whose memory calls the timeline asks the ledger for
const HOUR_MS = 3600 * 1000;
const MEMORY_CALLS = ["summarize", "extract", "embed"];
const costFmt = new Intl.NumberFormat("en", { maximumSignificantDigits: 3 });

// loadReceipts reads the receipts of the conversation's newest
// RECEIPT_SPAN messages after seq from, oldest first, keeping the newest
// RECEIPT_CAP.
async function loadReceipts(id, from) {
  const out = [];
  let after = from;
  for (;;) {
    const page = await api("GET", convPath(id, "receipts"), { query: { after: after || undefined, limit: MESSAGE_PAGE } });
    out.push(...page.receipts);
    if (out.length > RECEIPT_CAP) out.splice(0, out.length - RECEIPT_CAP);
    if (page.next_after === null || page.next_after === undefined) return out;
    after = page.next_after;
  }
}

// replyTimes adds to at (seq to time) the times of the receipts' replies
// that the page has not loaded (a long conversation's newest), reading
// the messages of their span: at most RECEIPT_SPAN.
async function replyTimes(id, receipts, at) {
  const missing = receipts.map((r) => r.seq).filter((q) => !at.has(q));
  if (missing.length === 0) return;
  let after = Math.min(...missing) - 1;
  const last = Math.max(...missing);
  while (after < last) {
    const page = await api("GET", convPath(id, "messages"), { query: { after: after || undefined, limit: MESSAGE_PAGE } });
    for (const m of page.messages) at.set(m.seq, Date.parse(m.created_at));
    if (page.next_after === null || page.next_after === undefined) return;
    after = page.next_after;
  }
}

// sentSeqs is the set of the conversation's own stored messages a
// receipt sent (recalled ones from other conversations aside).
function sentSeqs(r) {
  const s = new Set();
  for (const sp of r.sent || []) {
    if (sp.conversation || !sp.from) continue;
    for (let q = sp.from; q <= sp.to; q++) s.add(q);
  }
  return s;
}

// ranges writes a set of seqs as runs: "#1–#4, #7".
function ranges(set) {
  const xs = [...set].sort((a, b) => a - b);
  const out = [];
  for (let i = 0; i < xs.length; ) {
    let j = i;
    while (j + 1 < xs.length && xs[j + 1] === xs[j] + 1) j++;
    out.push(i === j ? "#" + xs[i] : `#${xs[i]}–#${xs[j]}`);
    i = j + 1;
  }
  return out.join(", ");
}

// spanText names a run a receipt sent: its part and its seqs.
function spanText(sp) {
  if (!sp.from) return sp.part;
  const r = sp.from === sp.to ? "#" + sp.from : `#${sp.from}–#${sp.to}`;
  return `${sp.part} ${sp.conversation ? sp.conversation + " " : ""}${r}`;
}

// turnCost is what an upstream's reported tokens cost at price p, as the
// server's ledger prices them (chatmem.Price.Cost); null without a price.
function turnCost(p, up) {
  if (!p || !up) return null;
  const cached = up.cached_input_tokens || 0;
  const reasoning = up.reasoning_tokens || 0;
  return ((up.input_tokens - cached) * p.input + cached * p.cached_input + (up.output_tokens - reasoning) * p.output + reasoning * p.reasoning) / 1e6;
}

const hourOf = (t) => Math.floor(t / HOUR_MS) * HOUR_MS;
const isoHour = (t) => new Date(t).toISOString().replace(".000Z", "Z");

// hourUsage asks the ledger for the conversation's calls in the hour from
// t, by kind of call: {kind: {calls, input_tokens, ...}}. The ledger keeps
// hour buckets, so this is as fine as it gets.
async function hourUsage(id, t) {
  const rep = await api("GET", "/v1/usage", { query: { from: isoHour(t), to: isoHour(t + HOUR_MS), group_by: "conversation" } });
  const g = rep.groups.find((x) => x.key === id);
  return g ? g.by_kind : {};
}

// loadTimeline shows the conversation's turns as sent: one entry per
// stored receipt, in order, grouped by the hour the reply was stored in,
// each hour with the memory's own model calls the ledger counted in it.
async function loadTimeline() {
  const id = state.conv.id;
  showError("timeline-error", null);
  let receipts = [];
  let prices = {};
  try {
    const from = Math.max(0, (state.conv.last_seq || 0) - RECEIPT_SPAN);
    $("timeline-span").hidden = from === 0;
    $("timeline-span").textContent = `The turns of the newest ${fmtNum(RECEIPT_SPAN)} messages (after #${fmtNum(from)}); the API's receipts list pages through the rest.`;
    const [rs, ps] = await Promise.all([loadReceipts(id, from), api("GET", "/v1/prices").catch(() => ({ prices: {} }))]);
    receipts = rs;
    prices = ps.prices || {};
  } catch (err) {
    if (!state.conv || state.conv.id !== id) return;
    showError("timeline-error", err);
  }
  if (!state.conv || state.conv.id !== id) return;
  const at = new Map(state.messages.map((m) => [m.seq, Date.parse(m.created_at)]));
  try {
    await replyTimes(id, receipts, at);
  } catch (err) {
    showError("timeline-error", err); // the turns show without their hours
  }
  if (!state.conv || state.conv.id !== id) return;
  // The hours the turns fall in, newest HOUR_CAP, and the ledger's counts.
  const hours = [...new Set(receipts.map((r) => at.get(r.seq)).filter((t) => !isNaN(t) && t !== undefined).map(hourOf))].sort((a, b) => a - b);
  const asked = hours.slice(-HOUR_CAP);
  const usage = new Map();
  let ledger = "ok";
  const answers = await Promise.allSettled(asked.map((h) => hourUsage(id, h)));
  answers.forEach((a, i) => {
    if (a.status === "fulfilled") usage.set(asked[i], a.value);
    else ledger = a.reason && a.reason.status === 503 ? "none" : "failed";
  });
  if (!state.conv || state.conv.id !== id) return;

  const models = Object.keys(prices);
  $("timeline-prices").textContent = models.length
    ? `Costs at the server's prices per million tokens (${models.sort().join(", ")}), in the prices file's unit.`
    : "No prices are configured on the server (chatmem serve --prices): tokens only.";
  const items = [];
  let prev = null;
  let hour = null;
  receipts.forEach((rec, i) => {
    const t = at.get(rec.seq);
    const h = t === undefined || isNaN(t) ? null : hourOf(t);
    if (h !== hour || i === 0) {
      hour = h;
      items.push(hourItem(h, usage, ledger));
    }
    items.push(turnItem(rec, i + 1, prev, t, prices));
    prev = rec.receipt;
  });
  $("timeline").replaceChildren(...items);
  $("timeline-empty").hidden = receipts.length > 0;
  $("timeline").dataset.conv = id; // whose turns show now, for tests to wait on
}

// hourItem heads the turns of one hour with the memory's own model calls
// (summarizer, extractors, embedder) the ledger counted for the
// conversation in that hour.
function hourItem(h, usage, ledger) {
  const li = el("li", { cls: "hour", attrs: { "data-hour": h === null ? "" : isoHour(h) } });
  if (h === null) {
    li.append(el("p", { cls: "hour-head", text: "Replies not loaded on this page" }));
    return li;
  }
  const end = new Date(h + HOUR_MS);
  const head = `${new Date(h).toLocaleString("en-GB", { dateStyle: "medium", timeStyle: "short", timeZone: "UTC" })}–${end.toLocaleTimeString("en-GB", { timeStyle: "short", timeZone: "UTC" })} UTC`;
  li.append(el("p", { cls: "hour-head", text: head }));
  const by = usage.get(h);
  let text;
  if (by === undefined) {
    text = ledger === "none" ? "This server keeps no usage ledger: the memory's own model calls are not counted." : "The memory's own model calls of this hour could not be read.";
  } else {
    const parts = MEMORY_CALLS.filter((k) => by[k] && by[k].calls).map((k) => {
      const u = by[k];
      const tok = k === "embed" ? `${fmtNum(u.embedding_input_tokens)} tokens` : `${fmtNum(u.input_tokens)} in, ${fmtNum(u.output_tokens)} out`;
      return `${k} ${fmtNum(u.calls)} call${u.calls === 1 ? "" : "s"} (${tok}${u.cost ? ", cost " + costFmt.format(u.cost) : ""})`;
    });
    text = parts.length ? "Memory's own model calls this hour: " + parts.join("; ") + "." : "No memory model calls this hour.";
    for (const k of MEMORY_CALLS) li.dataset[k] = String((by[k] && by[k].calls) || 0);
  }
  li.append(el("p", { cls: "hour-memory", text }));
  return li;
}

// turnItem is one reply's entry: what the model saw, the window's change
// since prev (the turn before's receipt), and the upstream's report.
function turnItem(rec, n, prev, t, prices) {
  const r = rec.receipt;
  const sent = sentSeqs(r);
  const before = prev ? sentSeqs(prev) : new Set();
  const entered = new Set([...sent].filter((q) => !before.has(q)));
  const left = new Set([...before].filter((q) => !sent.has(q)));
  const up = r.upstream;
  const cost = up ? turnCost(prices[up.model], up) : null;
  const li = el("li", {
    cls: "turn",
    attrs: {
      "data-seq": String(rec.seq),
      "data-sent": ranges(sent),
      "data-entered": ranges(entered),
      "data-left": ranges(left),
      "data-input": String(up ? up.input_tokens : ""),
      "data-output": String(up ? up.output_tokens : ""),
      "data-cached": String(up ? up.cached_input_tokens || 0 : ""),
      "data-cost": cost === null ? "" : String(cost),
    },
  });
  const link = el("button", { cls: "link", text: "#" + rec.seq, attrs: { type: "button", "aria-label": "Show reply " + rec.seq } });
  link.addEventListener("click", () => showMessage(rec.seq));
  const head = el("header", { cls: "turn-head" }, el("span", { cls: "turn-n", text: "Turn " + n }), document.createTextNode(" reply "), link);
  if (t !== undefined && !isNaN(t)) head.append(el("time", { text: fmtTime(new Date(t).toISOString()), attrs: { datetime: new Date(t).toISOString() } }));
  const pol = r.policy || {};
  head.append(el("span", { cls: "muted", text: `${pol.kind}${pol.budget ? " " + pol.budget : ""}${pol.turns ? " turns " + pol.turns : ""} · ${r.tokenizer}` }));
  if (r.tail_cache) head.append(el("span", { cls: "badge", text: "tail cache hit" }));
  li.append(head);

  const dl = el("dl", { cls: "turn-facts" });
  const row = (name, cls, ...content) => dl.append(el("div", { cls }, el("dt", { text: name }), el("dd", {}, ...content)));
  const saw = (r.sent || []).map(spanText);
  if (r.summary) saw.unshift(`summary of #1–#${r.summary.covers_seq}`);
  row("Saw", "saw", document.createTextNode(saw.join(" · ") + (r.left_out ? ` · ${fmtNum(r.left_out)} left out` : "")));
  const extras = [];
  if (r.facts && r.facts.length) extras.push("facts " + r.facts.map((f) => f.key).join(", "));
  if (r.recalled && r.recalled.length) extras.push("recalled " + r.recalled.map((x) => `${x.conversation ? x.conversation + " " : ""}#${x.seq}${x.terms && x.terms.length ? " (" + x.terms.join(", ") + ")" : ""}`).join(", "));
  if (extras.length) row("With", "with", document.createTextNode(extras.join(" · ")));
  const change = [];
  if (entered.size) change.push(el("span", { cls: "entered", text: "+ " + ranges(entered) }));
  if (left.size) change.push(el("span", { cls: "left", text: "− " + ranges(left) }));
  if (prev && (prev.summary ? prev.summary.covers_seq : 0) !== (r.summary ? r.summary.covers_seq : 0)) {
    change.push(el("span", { cls: "summary-change", text: r.summary ? `summary now covers #1–#${r.summary.covers_seq}` : "no summary sent" }));
  }
  if (!change.length) change.push(document.createTextNode(prev ? "no change" : "first turn"));
  row("Window change", "change", ...change);
  const tk = r.tokens || {};
  const parts = ["pinned", "facts", "summary", "recalled", "recent", "reserved", "overhead"].filter((p) => tk[p]).map((p) => `${p} ${fmtNum(tk[p])}`);
  row("Tokens by part", "parts", document.createTextNode(parts.join(" · ") || "0"));
  if (up) {
    const use = [`${fmtNum(up.input_tokens)} in`];
    if (up.cached_input_tokens) use[0] += ` (${fmtNum(up.cached_input_tokens)} cached)`;
    use.push(`${fmtNum(up.output_tokens)} out` + (up.reasoning_tokens ? ` (${fmtNum(up.reasoning_tokens)} reasoning)` : ""));
    use.push(cost === null ? "no price" : "cost " + costFmt.format(cost));
    use.push(`${fmtNum(up.latency_ms)} ms`);
    if (up.chatmem_tokens) use.push(`chatmem counted ${fmtNum(up.chatmem_tokens)}`);
    row("Upstream " + (up.model || ""), "upstream", document.createTextNode(use.join(" · ")));
  }
  li.append(dl);
  return li;
}

// ---- per-turn chart ---------------------------------------------------

// prevUnit and select repeat chatmem's Select (policy.go) over the loaded
// messages: walking back from the newest unit (a message, or a tool call
// with all its results), stop at the first that does not fit, then drop
// leading units until the window starts with a user message.
function prevUnit(ns, end) {
  const i = end - 1;
  const m = ns[i];
  let u;
  if (m.role === "tool") {
    let j = i;
    while (j >= 0 && ns[j].role === "tool") j--;
    if (j >= 0 && ns[j].tool_calls && ns[j].tool_calls.length) {
      u = { start: j, end, valid: answersAll(ns[j], ns.slice(j + 1, end)), user: false };
    } else {
      u = { start: j + 1, end, valid: false, user: false };
    }
  } else if (m.tool_calls && m.tool_calls.length) {
    u = { start: i, end, valid: false, user: false };
  } else {
    u = { start: i, end, valid: true, user: m.role === "user" };
  }
  u.tokens = 0;
  for (let k = u.start; k < u.end; k++) u.tokens += ns[k].tokens || 0;
  return u;
}

function answersAll(call, results) {
  if (results.length !== call.tool_calls.length) return false;
  const want = new Set(call.tool_calls.map((c) => c.id));
  for (const r of results) {
    if (!want.has(r.tool_call_id)) return false;
    want.delete(r.tool_call_id);
  }
  return true;
}

// select returns the tokens the policy sends for msgs (non-system messages
// in order) after sys pinned tokens, or null when the budget is too small.
function select(kind, budget, turns, overhead, sys, msgs) {
  let avail = -1;
  if (kind !== "all" && budget > 0) {
    avail = budget - sys - overhead;
    if (avail < 0) return null;
  }
  const walked = [];
  let used = 0;
  let nturns = 0;
  for (let pos = msgs.length; pos > 0; ) {
    const u = prevUnit(msgs, pos);
    if (u.valid) {
      if (avail >= 0 && used + u.tokens > avail) break;
      used += u.tokens;
    }
    walked.push(u);
    pos = u.start;
    if (kind === "last_turns" && u.valid && u.user && ++nturns === turns) break;
  }
  if (kind !== "all") {
    let first = walked.length - 1;
    for (; first >= 0 && !(walked[first].valid && walked[first].user); first--) {
      if (walked[first].valid) used -= walked[first].tokens;
    }
    if (first < 0) return null;
  }
  return sys + used + overhead;
}

// turnSeries computes, for each user message (a turn), the tokens each
// policy sends with the history up to and including it.
function turnSeries() {
  const budget = parseInt($("budget").value, 10);
  const turns = Math.max(1, parseInt($("turns").value, 10) || 1);
  const overhead = state.window ? state.window.parts.overhead : 0;
  const recent = [];
  let sys = 0;
  let cumulative = 0;
  const pts = { all: [], last_turns: [], token_budget: [] };
  const xs = [];
  for (const m of state.messages) {
    if (m.role === "system") {
      sys += m.tokens || 0;
      continue;
    }
    recent.push(m);
    cumulative += m.tokens || 0;
    if (m.role !== "user") continue;
    xs.push(m.seq);
    pts.all.push(sys + cumulative + overhead);
    pts.last_turns.push(select("last_turns", 0, turns, overhead, sys, recent));
    pts.token_budget.push(select("token_budget", budget, 0, overhead, sys, recent));
  }
  return { xs, pts, budget, turns };
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

const SERIES = [
  { key: "all", label: "all", cls: "s-all" },
  { key: "token_budget", label: "token_budget", cls: "s-budget" },
  { key: "last_turns", label: "last_turns", cls: "s-turns" },
];

function drawChart() {
  const box = $("chart");
  if (!state.conv) return;
  const { xs, pts, budget, turns } = turnSeries();
  $("chart-note").textContent =
    `Each point is one turn (a user message): the tokens sent with the history up to it, from the stored counts (${state.conv.tokenizer}). ` +
    `all sends everything; token_budget at ${budget} tokens; last_turns at ${turns} turns. ` +
    `summary_buffer stays within the budget line, with the summary taking part of it.`;
  if (xs.length === 0) {
    box.replaceChildren(el("p", { cls: "muted", text: "No user messages yet." }));
    return;
  }
  const W = 760, H = 260, L = 52, R = 16, T = 14, B = 34;
  let ymax = budget;
  for (const s of SERIES) for (const v of pts[s.key]) if (v !== null && v > ymax) ymax = v;
  ymax = niceCeil(ymax);
  const n = xs.length;
  const x = (i) => L + (n === 1 ? (W - L - R) / 2 : (i * (W - L - R)) / (n - 1));
  const y = (v) => T + (H - T - B) * (1 - v / ymax);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": "chart-svg-title chart-svg-desc", class: "chart-svg" });
  root.append(svg("title", { id: "chart-svg-title" }, "Tokens sent per turn under each policy"));
  const last = (k) => pts[k][n - 1];
  root.append(svg("desc", { id: "chart-svg-desc" }, `${n} turns. At the last turn: all ${last("all")}, token_budget ${last("token_budget") ?? "too small"}, last_turns ${last("last_turns") ?? "too small"} tokens.`));
  for (let k = 0; k <= 4; k++) {
    const v = (ymax * k) / 4;
    root.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    root.append(svg("text", { x: L - 6, y: y(v) + 4, class: "tick", "text-anchor": "end" }, fmtNum(Math.round(v))));
  }
  const step = Math.max(1, Math.ceil(n / 12));
  for (let i = 0; i < n; i += step) {
    root.append(svg("text", { x: x(i), y: H - B + 16, class: "tick", "text-anchor": "middle" }, String(i + 1)));
  }
  root.append(svg("text", { x: (L + W - R) / 2, y: H - 4, class: "axis", "text-anchor": "middle" }, "turn"));
  root.append(svg("line", { x1: L, x2: W - R, y1: y(budget), y2: y(budget), class: "budget-line" }));
  root.append(svg("text", { x: W - R, y: y(budget) - 4, class: "tick", "text-anchor": "end" }, `budget ${budget}`));
  for (const s of SERIES) {
    const g = svg("g", { class: "series " + s.cls });
    let d = "";
    let pen = false;
    pts[s.key].forEach((v, i) => {
      if (v === null) {
        pen = false;
        return;
      }
      d += (pen ? "L" : "M") + x(i).toFixed(1) + " " + y(v).toFixed(1) + " ";
      pen = true;
    });
    if (d) g.append(svg("path", { d }));
    if (n <= 60) {
      pts[s.key].forEach((v, i) => {
        if (v === null) return;
        const c = svg("circle", { cx: x(i), cy: y(v), r: 3.5 });
        c.append(svg("title", {}, `turn ${i + 1} (message #${xs[i]}): ${s.label} sends ${fmtNum(v)} tokens`));
        g.append(c);
      });
    }
    root.append(g);
  }
  const legend = el(
    "ul",
    { cls: "chart-legend" },
    ...SERIES.map((s) => el("li", {}, el("span", { cls: "swatch " + s.cls }), document.createTextNode(" " + s.label))),
    el("li", {}, el("span", { cls: "swatch s-line" }), document.createTextNode(" budget")),
  );
  box.replaceChildren(root, legend);
}

function niceCeil(v) {
  if (v <= 10) return 10;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// ---- start ------------------------------------------------------------

initKey();
initList();
initConversation();
initPolicy();
initFacts();
initUser();
window.addEventListener("hashchange", route);
loadList();
route();
