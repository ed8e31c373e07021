// wikidrift annotation page. Plain browser JavaScript, no libraries, no external requests.
// Text from tasks is always inserted with textContent, never as HTML.
"use strict";

const NAME_KEY = "wikidrift.annotator";
const NAME_RE = /^[a-z0-9][a-z0-9_-]{0,39}$/;
const KEY_LABELS = { "1": "supported", "2": "not_supported", "3": "uncertain" };
const LABEL_TEXT = {
  supported: "Supported",
  not_supported: "Not supported",
  uncertain: "Uncertain",
};

const state = {
  annotator: null,
  info: null,
  tasks: [], // every task, in annotation order
  index: new Map(), // task_id -> position (0-based)
  judgments: {}, // task_id -> label, this annotator's current answers
  current: null, // the task on screen, or null (login / done)
  shownAt: 0, // when the current task appeared, for elapsed_ms
  busy: false, // a judgment is being saved: ignore further keys until it is
};

const $ = (id) => document.getElementById(id);

function show(section) {
  for (const id of ["login", "task", "done"]) $(id).hidden = id !== section;
}

function setStatus(text, isError = false) {
  const el = $("status");
  el.textContent = text;
  el.classList.toggle("error", isError);
  el.setAttribute("role", isError ? "alert" : "status");
}

// A 503 with Retry-After means every connection slot stayed busy: the server read nothing, so
// the same request is sent again (a few times) after the wait it names.
const BUSY_RETRIES = 3;

async function api(path, options = {}) {
  let response = await fetch(path, options);
  for (let attempt = 0; attempt < BUSY_RETRIES; attempt += 1) {
    const retryAfter = response.headers.get("Retry-After");
    if (response.status !== 503 || retryAfter === null) break;
    const seconds = Math.min(Math.max(Number(retryAfter) || 1, 0), 10);
    setStatus(`Server busy; trying again in ${seconds} s.`);
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    response = await fetch(path, options);
  }
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  if (!response.ok) {
    const message = body && body.error ? body.error : `HTTP ${response.status}`;
    throw new Error(message);
  }
  return body;
}

function updateProgress() {
  const done = Object.keys(state.judgments).length;
  $("progress").textContent = `${done} / ${state.tasks.length}`;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// Old sentences with their section headings and "…" where indices jump.
function renderOldSentences(container, sentences, closestIdx) {
  container.replaceChildren();
  let lastIdx = null;
  let lastSection = null;
  for (const s of sentences) {
    if (lastIdx !== null && s.sent_idx !== lastIdx + 1) container.append(el("p", "gap", "…"));
    if (s.section !== undefined && s.section !== lastSection) {
      container.append(el("p", "old-section-head", s.section || "(lead)"));
      lastSection = s.section;
    }
    const p = el("p", "old-sentence", s.text);
    p.dataset.sentIdx = String(s.sent_idx);
    if (s.sent_idx === closestIdx) {
      p.classList.add("closest");
      p.title = "most similar old sentence";
    }
    container.append(p);
    lastIdx = s.sent_idx;
  }
}

function renderTask(task) {
  state.current = task;
  state.shownAt = Date.now();
  const position = state.index.get(task.task_id);
  $("title").textContent = task.title;
  $("section").textContent = task.section || "(lead)";
  $("position").textContent = `${position + 1} of ${state.tasks.length}`;

  const ctx = task.new_context || { before: [], after: [] };
  $("new-before").textContent = ctx.before.map((s) => s.text).join(" ");
  $("new-after").textContent = ctx.after.map((s) => s.text).join(" ");
  $("sentence").textContent = task.sentence;

  const isQa = task.kind === "qa" && task.qa;
  $("qa").hidden = !isQa;
  if (isQa) {
    $("qa-question").textContent = task.qa.question;
    $("qa-answer").textContent = task.qa.answer;
  }
  $("question").textContent = isQa
    ? "Given only the OLD article below, is this answer to the question supported?"
    : "Given only the OLD article below, is the highlighted sentence supported?";

  const closest = task.closest_old;
  const closestIdx = closest ? closest.sent_idx : null;
  const inContext = (task.old_context || []).some((s) => s.sent_idx === closestIdx);
  $("old-missing").hidden = task.old_article_sentences > 0;
  renderOldSentences($("old-context"), task.old_context || [], closestIdx);
  $("closest-elsewhere").hidden = !closest || inContext;
  $("closest-text").textContent = closest && !inContext ? closest.text : "";

  const section = task.old_section;
  $("old-section").hidden = !section;
  $("old-section").open = false;
  $("no-old-section").hidden = Boolean(section) || !(task.old_article_sentences > 0);
  if (section) {
    $("old-section-name").textContent = section.name || "(lead)";
    renderOldSentences($("old-section-body"), section.sentences, closestIdx);
    if (section.truncated) {
      $("old-section-body").append(
        el("p", "hint", `(${section.sentences.length} of ${section.total} sentences shown)`),
      );
    }
  }
  $("old-article").hidden = true;
  $("old-article").replaceChildren();

  const previous = state.judgments[task.task_id];
  for (const button of document.querySelectorAll("button.judge")) {
    button.classList.toggle("chosen", button.dataset.label === previous);
  }
  $("previous-answer").textContent = previous
    ? `Your answer so far: ${LABEL_TEXT[previous]}. Press 1, 2 or 3 to change it.`
    : "";
  show("task");
  window.scrollTo(0, 0);
}

function showDone() {
  state.current = null;
  show("done");
}

async function goNext(afterId) {
  const query = new URLSearchParams({ annotator: state.annotator });
  if (afterId) query.set("after", afterId);
  const next = await api(`/api/next?${query}`);
  if (next.task) renderTask(next.task);
  else showDone();
  updateProgress();
}

async function judge(label) {
  if (state.busy || !state.current) return;
  state.busy = true;
  const task = state.current;
  for (const button of document.querySelectorAll("#buttons button")) button.disabled = true;
  try {
    const saved = await api("/api/judgments", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        annotator: state.annotator,
        task_id: task.task_id,
        label,
        elapsed_ms: Math.max(0, Date.now() - state.shownAt),
      }),
    });
    state.judgments[task.task_id] = label;
    setStatus(`Saved: ${LABEL_TEXT[label]} (${saved.done} / ${saved.total}).`);
    await goNext(task.task_id);
  } catch (error) {
    setStatus(`Not saved: ${error.message}. Try again.`, true);
  } finally {
    for (const button of document.querySelectorAll("#buttons button")) button.disabled = false;
    state.busy = false;
  }
}

// Back: the closest earlier task this annotator has answered (from the end when all are done).
function back() {
  if (state.busy) return;
  const from = state.current ? state.index.get(state.current.task_id) : state.tasks.length;
  for (let i = from - 1; i >= 0; i -= 1) {
    if (state.judgments[state.tasks[i].task_id]) {
      renderTask(state.tasks[i]);
      setStatus("Went back: answer again to replace your earlier answer.");
      return;
    }
  }
  setStatus("Nothing to go back to.");
}

async function toggleArticle() {
  const task = state.current;
  if (!task) return;
  const box = $("old-article");
  if (!box.hidden) {
    box.hidden = true;
    return;
  }
  try {
    const article = await api(`/api/tasks/${encodeURIComponent(task.task_id)}/old-article`);
    if (state.current !== task) return; // moved on while loading
    box.replaceChildren();
    const near = new Set((task.old_context || []).map((s) => s.sent_idx));
    let first = null;
    if (!article.sections.length) box.append(el("p", "hint", "The old article is empty."));
    for (const section of article.sections) {
      box.append(el("h3", "", section.name || "(lead)"));
      for (const s of section.sentences) {
        const p = el("p", "old-sentence", s.text);
        if (near.has(s.sent_idx)) {
          p.classList.add("near");
          first = first || p;
        }
        if (task.closest_old && s.sent_idx === task.closest_old.sent_idx) p.classList.add("closest");
        box.append(p);
      }
    }
    box.hidden = false;
    box.scrollIntoView({ block: "nearest" });
    if (first) box.scrollTop = first.offsetTop - box.offsetTop - 40;
  } catch (error) {
    setStatus(`Could not load the old article: ${error.message}`, true);
  }
}

async function start(name) {
  const annotator = name.trim().toLowerCase().replace(/\s+/g, "-");
  if (!NAME_RE.test(annotator)) {
    $("login-error").textContent =
      "Use 1-40 lowercase letters, digits, - or _, starting with a letter or digit.";
    show("login");
    return;
  }
  try {
    const [info, tasks] = await Promise.all([
      api("/api/info"),
      api(`/api/tasks?${new URLSearchParams({ annotator })}`),
    ]);
    state.annotator = annotator;
    state.info = info;
    state.tasks = tasks.tasks;
    state.index = new Map(tasks.tasks.map((t, i) => [t.task_id, i]));
    state.judgments = tasks.judgments || {};
    localStorage.setItem(NAME_KEY, annotator);
    $("release").textContent = info.release;
    $("old-snapshot").textContent = info.old_snapshot || "?";
    $("annotator-label").textContent = annotator;
    $("who").hidden = false;
    $("login-error").textContent = "";
    $("annotator-input").blur();
    await goNext(null);
  } catch (error) {
    $("login-error").textContent = error.message;
    show("login");
  }
}

function askName() {
  state.annotator = null;
  state.current = null;
  $("who").hidden = true;
  show("login");
  $("annotator-input").value = "";
  $("annotator-input").focus();
}

document.addEventListener("keydown", (event) => {
  const target = event.target;
  if (target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement) return;
  if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
  if (!state.annotator) return;
  const key = event.key.toLowerCase();
  if (KEY_LABELS[key]) {
    event.preventDefault();
    judge(KEY_LABELS[key]);
  } else if (key === "u") {
    event.preventDefault();
    back();
  } else if (key === "o") {
    event.preventDefault();
    toggleArticle();
  }
});

$("login-form").addEventListener("submit", (event) => {
  event.preventDefault();
  start($("annotator-input").value);
});
for (const button of document.querySelectorAll("button.judge")) {
  button.addEventListener("click", () => judge(button.dataset.label));
}
$("back").addEventListener("click", back);
$("toggle-article").addEventListener("click", toggleArticle);
$("switch-annotator").addEventListener("click", () => {
  localStorage.removeItem(NAME_KEY);
  askName();
});

const remembered = localStorage.getItem(NAME_KEY);
if (remembered) start(remembered);
else askName();
