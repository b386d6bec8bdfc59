// One thread: the tree of its runs, and for the selected run its metadata, a timeline of its
// events, and the conversation and state at the selected point, with a fork composer.

import { ApiError, followRun, getJSON, paths } from "./api.js";
import { conversation } from "./conversation.js";
import { AnnotationsPanel } from "./annotations.js";
import { ComparePanel } from "./compare.js";
import { highlight } from "./search.js";
import { Composer } from "./fork.js";
import { forkedFrom, pointText, threadForks, threadHash } from "./lineage.js";
import { ago, debounce, elapsed, h, replace, shortId, statusBadge, when } from "./dom.js";
import { diff, jsonTree, short } from "./json.js";
import { Timeline } from "./timeline.js";

const PAGE = 500; // events per page request
const TERMINAL_EVENTS = new Set(["RUN_FINISHED", "RUN_ERROR"]);

function flatten(nodes, out = new Map()) {
  for (const node of nodes) {
    out.set(node.runId, node);
    flatten(node.children, out);
  }
  return out;
}

export class ThreadView {
  constructor(app, threadId) {
    this.app = app;
    this.threadId = threadId;
    this.thread = null;
    this.nodes = new Map();
    this.runId = null;
    this.run = null;
    this.seq = -1;
    this.follow = false;
    this.live = null;
    this.states = new Map();
    this.pages = new Map();
    this.pointTicket = 0;
    this.opened = new Set(); // reasoning the user opened stays open while scrubbing
    this.stateMode = "tree";
    this.timers = new Set();
    this.destroyed = false;

    this.timeline = new Timeline({
      onSelect: (seq) => this.chosen(seq),
      onNeed: (from, to) => this.need(from, to),
    });
    this.requestPoint = debounce((seq) => this.loadPoint(seq), 90, 250);
    this.needed = null;
    this.loadNeeded = debounce(() => this.loadVisible(), 50);
    this.retries = 0;
    this.polling = false;
    this.writeUrl = debounce(() => {
      if (this.destroyed || !this.runId) return;
      const hash = threadHash(this.threadId, this.runId, this.follow ? null : this.seq);
      if (location.hash !== hash) history.replaceState(null, "", hash);
    }, 250);
    this.build();
  }

  build() {
    this.head = h("div", { class: "thread-head" });
    this.tree = h("nav", { class: "run-tree", "aria-label": "Runs of this thread" });
    this.meta = h("div", { class: "run-meta" });
    this.annotations = new AnnotationsPanel(this);
    this.compare = new ComparePanel(this);
    this.left = h("aside", { class: "pane left-pane" },
      this.head,
      h("div", { class: "pane-head" }, h("h2", {}, "Runs"),
        h("span", { class: "legend muted" }, h("span", { class: "legend-given" }), "given",
          h("span", { class: "legend-inferred" }), "inferred")),
      this.tree, this.meta, this.annotations.root, this.compare.root);

    this.pointHead = h("div", { class: "point-head" });
    this.messages = h("div", { class: "messages", id: "conversation", "aria-live": "off" });
    this.composer = new Composer(this);
    this.convo = h("section", { class: "convo", "aria-label": "Conversation at this point" },
      this.messages, this.composer.root);

    this.diffList = h("ul", { class: "diff", id: "state-diff" });
    this.stateBody = h("div", { class: "state-body" });
    this.treeButton = h("button", { type: "button", class: "toggle", "aria-pressed": "true",
      onclick: () => this.setStateMode("tree") }, "Tree");
    this.jsonButton = h("button", { type: "button", class: "toggle", id: "state-json-toggle",
      "aria-pressed": "false", onclick: () => this.setStateMode("json") }, "JSON");
    this.statePane = h("section", { class: "state-pane", "aria-label": "State at this point" },
      h("div", { class: "pane-head" }, h("h2", {}, "State"),
        h("div", { class: "toggles" }, this.treeButton, this.jsonButton)),
      this.diffList, this.stateBody);

    this.point = h("section", { class: "pane main-pane", id: "point" },
      this.pointHead, h("div", { class: "main-split" }, this.convo, this.statePane));

    this.root = h("div", { class: "thread-view" }, this.left, this.timeline.root, this.point);
    this.onKey = (e) => this.globalKey(e);
    document.addEventListener("keydown", this.onKey);
  }

  destroy() {
    this.destroyed = true;
    this.live?.close();
    this.requestPoint.cancel();
    this.writeUrl.cancel();
    for (const t of this.timers) clearTimeout(t);
    document.removeEventListener("keydown", this.onKey);
  }

  later(fn, ms) {
    const t = setTimeout(() => {
      this.timers.delete(t);
      if (!this.destroyed) fn();
    }, ms);
    this.timers.add(t);
  }

  // -- the thread and its tree ------------------------------------------------------------

  async load() {
    this.thread = await getJSON(paths.thread(this.threadId));
    this.nodes = flatten(this.thread.runs);
    this.drawHead();
    this.drawTree();
    this.pollTree();
    this.compare.drawRuns();
    if (!this.annotations.saved) this.annotations.load();
  }

  async reloadThread() {
    try {
      await this.load();
    } catch (error) {
      this.app.inline(error, this.tree);
      return;
    }
    if (this.run) this.timeline.forks = this.forksOf(this.runId);
    this.timeline.drawMarks();
    this.timeline.schedule();
  }

  // While a run of the thread is recording, the tree is refreshed: statuses, new runs.
  pollTree() {
    const running = [...this.nodes.values()].some((n) => n.status === "running");
    if (!running || this.polling) return;
    this.polling = true;
    this.later(() => {
      this.polling = false;
      this.reloadThread();
    }, 2000);
  }

  drawHead() {
    const t = this.thread;
    this.notice ??= this.app.takeNotice(this.threadId);
    const notice = this.notice;
    replace(this.head,
      h("h1", { class: "thread-id", title: t.threadId }, t.threadId),
      h("div", { class: "muted small" }, t.agent ? `agent ${t.agent} · ` : "",
        `${t.runCount} run${t.runCount === 1 ? "" : "s"} · updated `,
        h("time", { datetime: t.updatedAt, title: when(t.updatedAt) }, ago(t.updatedAt))),
      t.forkedFrom ? forkedFrom(t.forkedFrom) : null,
      notice ? h("p", { class: "notice small", role: "status", id: "fork-notice" }, notice) : null);
  }

  drawTree() {
    const item = (node) => {
      const selected = node.runId === this.runId;
      const lineage = node.parentRunId
        ? node.parentInferred ? "inferred" : "given"
        : "root";
      let fork = null;
      if (node.parentRunId && node.parentSeq !== null) {
        fork = h("span", { class: "fork-point", title: `forked ${pointText(node.parentSeq)}` },
          h("span", { class: "fork-icon", "aria-hidden": "true" }), pointText(node.parentSeq));
      } else if (node.parentRunId) {
        fork = h("span", { class: "fork-point", title: "continues after the parent's end" },
          "after end");
      }
      return h("li", { role: "treeitem", class: `lineage-${lineage}`,
        "aria-expanded": node.children.length ? "true" : null,
        "aria-selected": selected ? "true" : "false" },
        h("a", {
          class: `run-node${selected ? " selected" : ""}`, href: threadHash(this.threadId, node.runId),
          "aria-current": selected ? "page" : null, dataset: { runId: node.runId },
          title: `${node.runId}\n${node.status}${node.parentInferred ? "\nparent inferred (no parentRunId was posted)" : ""}`,
        },
          h("span", { class: `dot dot-${node.status}`, "aria-hidden": "true" }),
          h("span", { class: "run-name mono" }, shortId(node.runId, 24)),
          h("span", { class: "run-sub muted" },
            h("span", { class: "run-count" }, `${node.eventCount} ev`), fork ? " · " : "", fork,
            lineage === "inferred" ? h("span", { class: "tag-inferred" }, "inferred") : null),
        ),
        threadForks(this.threadForks(node.runId)),
        node.children.length ? h("ul", { role: "group" }, node.children.map(item)) : null);
    };
    if (!this.thread.runs.length) {
      replace(this.tree, h("p", { class: "empty" }, "This thread has no runs."));
      return;
    }
    replace(this.tree, h("ul", { class: "tree", role: "tree" }, this.thread.runs.map(item)));
  }

  hashFor(runId, seq = null) {
    return threadHash(this.threadId, runId, seq);
  }

  // The threads that branched off a run of this thread.
  threadForks(runId) {
    return (this.thread?.forks || []).filter((f) => f.forkedFrom?.runId === runId);
  }

  // Where the timeline marks forks: seq -> the runs (and threads) that branched there.
  forksOf(runId) {
    const forks = new Map();
    const add = (seq, name) => forks.set(seq, [...(forks.get(seq) || []), name]);
    for (const child of this.nodes.get(runId)?.children || []) {
      if (child.parentSeq === null || child.parentSeq === undefined) continue;
      add(child.parentSeq, child.runId);
    }
    for (const fork of this.threadForks(runId)) {
      const seq = fork.forkedFrom.seq;
      if (seq !== null && seq !== undefined) add(seq, `thread ${fork.threadId}`);
    }
    return forks;
  }

  // -- routing ----------------------------------------------------------------------------

  async show(runId, seq) {
    if (!this.thread) {
      await this.load();
    }
    if (!runId) {
      runId = this.thread.latestRunId;
      if (!runId) {
        replace(this.pointHead, h("p", { class: "empty" }, "No runs to show."));
        return;
      }
      history.replaceState(null, "", threadHash(this.threadId, runId));
    }
    if (runId !== this.runId) await this.selectRun(runId, seq);
    else if (seq !== null && seq !== this.seq) this.goTo(seq, { scroll: true, now: true });
    else if (seq === null && !this.follow) this.goTo(this.timeline.count - 1, { follow: true });
  }

  async selectRun(runId, seq) {
    this.live?.close();
    this.live = null;
    this.runId = runId;
    this.run = null;
    this.states = new Map();
    this.pages = new Map();
    this.composer.reset();
    this.retries = 0;
    this.pointHead.classList.remove("live");
    this.drawTree();
    replace(this.meta);
    delete this.point.dataset.failed;
    let run;
    try {
      run = await getJSON(paths.run(runId));
      if (run.threadId !== this.threadId) {
        throw new ApiError("not-found", 404,
          `Run ${runId} belongs to thread ${run.threadId}, not to this one.`);
      }
    } catch (error) {
      if (this.runId !== runId || this.destroyed) return;
      if (error instanceof ApiError && error.kind === "not-found" && error.status === 404
        && !error.message.startsWith("Run ")) {
        error.message = `There is no run "${runId}" in this recorder.`;
      }
      this.failed(error);
      return;
    }
    if (this.runId !== runId || this.destroyed) return;
    this.run = run;
    this.drawMeta();
    this.annotations.draw();
    this.compare.drawRuns();
    this.timeline.reset(run, this.forksOf(runId));
    const last = run.eventCount - 1;
    const target = seq === null || seq === undefined ? last : Math.min(seq, last);
    this.timeline.select(target);
    await this.loadPage(Math.floor(Math.max(0, target) / PAGE));
    if (this.runId !== runId || this.destroyed) return;
    this.goTo(target, { follow: seq === null || seq === undefined, now: true, scroll: true });
    if (run.status === "running") this.attach();
    this.timeline.list.focus({ preventScroll: true });
  }

  // The run cannot be shown: say why where it would be, leave nothing stale beside it.
  failed(error) {
    this.timeline.clear();
    this.point.dataset.failed = "true";
    delete this.point.dataset.loading;
    delete this.point.dataset.shownSeq;
    this.app.inline(error, this.pointHead);
  }

  drawMeta() {
    const r = this.run;
    const row = (label, ...value) => [h("dt", {}, label), h("dd", {}, ...value)];
    // A parent outside this thread is the point the thread branched off at.
    const origin = this.thread?.forkedFrom;
    const elsewhere = r.parentRunId && !this.nodes.has(r.parentRunId);
    const parentThread = elsewhere && origin?.runId === r.parentRunId ? origin.threadId
      : this.threadId;
    const parent = r.parentRunId
      ? [h("a", { href: threadHash(parentThread, r.parentRunId,
          r.parentSeq === null ? null : r.parentSeq), class: "mono", title: r.parentRunId },
          shortId(r.parentRunId)),
        ` ${pointText(r.parentSeq)}`,
        elsewhere && parentThread ? ` (thread ${parentThread})` : "",
        r.parentInferred ? h("span", { class: "tag-inferred" }, "inferred") : null]
      : ["none (starts the thread)"];
    const violations = r.violations || [];
    replace(this.meta,
      h("div", { class: "pane-head" }, h("h2", {}, "Run"), statusBadge(r.status)),
      h("dl", { class: "meta", id: "run-meta" },
        row("run", h("span", { class: "mono wrap" }, r.runId)),
        row("status", h("span", { id: "run-status" }, r.status)),
        row("outcome", r.outcome || "—"),
        r.error ? row("error", h("span", { class: "error-text" },
          typeof r.error === "string" ? r.error : JSON.stringify(r.error))) : null,
        row("agent", r.agent || "—"),
        row("parent", ...parent),
        row("started", h("time", { datetime: r.createdAt }, when(r.createdAt))),
        row("finished", r.finishedAt ? h("time", { datetime: r.finishedAt }, when(r.finishedAt))
          : "still recording"),
        row("duration", r.durationMs === null ? "—" : elapsed(r.durationMs)),
        row("events", h("span", { id: "run-events" }, String(r.eventCount))),
        row("origin", r.origin || "—")),
      h("h3", {}, "Protocol violations"),
      violations.length
        ? h("ul", { class: "violations" }, violations.map((v) =>
          h("li", {}, typeof v === "string" ? v : v.message || JSON.stringify(v))))
        : h("p", { class: "muted small" }, "None found."));
  }

  // -- events: pages, live ----------------------------------------------------------------

  // One page of events at a time; a page asked for while it loads shares that request.
  loadPage(page) {
    let entry = this.pages.get(page);
    if (!entry) {
      entry = { promise: null, at: 0, timer: false };
      this.pages.set(page, entry);
    }
    if (entry.promise) return entry.promise;
    entry.at = Date.now();
    const runId = this.runId;
    entry.promise = getJSON(paths.events(runId), {
      query: { afterSeq: page * PAGE - 1, limit: PAGE },
    })
      .then((data) => {
        if (runId !== this.runId || this.destroyed) return;
        for (const e of data.events) {
          const type = e.type || (e.event ? "(no type)" : "(not JSON)");
          this.timeline.put(e.seq, { seq: e.seq, type, recordedAt: e.recordedAt, event: e.event });
        }
        const top = data.events.length ? data.events.at(-1).seq + 1 : 0;
        if (top > this.timeline.count) this.timeline.setCount(top);
      })
      .catch((error) => {
        if (runId === this.runId) this.app.inline(error, this.pointHead);
      })
      .finally(() => {
        entry.promise = null;
      });
    return entry.promise;
  }

  // Rows in view that are not loaded (or, live, not timed yet): asked for once scrolling or
  // dragging pauses, each page at most every 400 ms.
  need(from, to) {
    this.needed = [from, to];
    this.loadNeeded();
  }

  loadVisible() {
    if (!this.needed || this.destroyed) return;
    const [from, to] = this.needed;
    for (let page = Math.floor(from / PAGE); page <= Math.floor(to / PAGE); page++) {
      const entry = this.pages.get(page);
      if (entry?.promise) continue;
      const wait = entry ? 400 - (Date.now() - entry.at) : 0;
      if (wait <= 0) this.loadPage(page);
      else if (!entry.timer) {
        entry.timer = true;
        this.later(() => {
          entry.timer = false;
          this.timeline.schedule();
        }, wait);
      }
    }
  }

  attach() {
    const runId = this.runId;
    this.live = followRun(runId, this.timeline.count - 1, {
      onEvent: (seq, data) => this.arrived(runId, seq, data),
      onClose: () => this.detached(runId),
    });
    this.pointHead.classList.add("live");
  }

  arrived(runId, seq, data) {
    if (runId !== this.runId || Number.isNaN(seq)) return;
    this.retries = 0;
    let event = null;
    try {
      event = JSON.parse(data);
    } catch {
      // a garbage frame is recorded as received; it still takes its place on the timeline
    }
    if (!this.timeline.get(seq)) {
      this.timeline.put(seq, { seq, type: event?.type || "(not JSON)", recordedAt: null, event });
    }
    if (seq + 1 > this.timeline.count) {
      this.timeline.setCount(seq + 1);
      const count = document.getElementById("run-events");
      if (count) count.textContent = String(seq + 1);
      const node = this.tree.querySelector(`.run-node.selected .run-count`);
      if (node) node.textContent = `${seq + 1} ev`;
    }
    if (this.follow) this.goTo(seq, { follow: true });
    if (event && TERMINAL_EVENTS.has(event.type)) this.later(() => this.refreshRun(), 150);
  }

  async detached(runId) {
    if (runId !== this.runId || this.destroyed) return;
    this.live = null;
    await this.refreshRun();
    if (runId !== this.runId || this.destroyed) return;
    if (this.run.status === "running") {
      // the stream broke while the run goes on: resume after the last event seen, backing off
      const wait = Math.min(10000, 300 * 2 ** this.retries++);
      this.later(() => {
        if (runId === this.runId && !this.live) this.attach();
      }, wait);
    }
  }

  async refreshRun() {
    const runId = this.runId;
    let run;
    try {
      run = await getJSON(paths.run(runId));
    } catch (error) {
      this.app.inline(error, this.pointHead);
      return;
    }
    if (runId !== this.runId || this.destroyed) return;
    const ended = this.run.status === "running" && run.status !== "running";
    this.run = run;
    this.drawMeta();
    if (run.eventCount > this.timeline.count) this.timeline.setCount(run.eventCount);
    if (ended) {
      this.live?.close();
      this.live = null;
      this.pointHead.classList.remove("live");
      if (this.follow) this.goTo(run.eventCount - 1, { follow: true });
      this.timeline.schedule();
      await this.reloadThread();
    }
  }

  // -- the selected point ------------------------------------------------------------------

  chosen(seq) {
    // choosing the last event of a run still recording follows it again
    this.follow = this.run?.status === "running" && seq === this.timeline.count - 1;
    this.goTo(seq, { scroll: false });
    this.writeUrl();
  }

  goTo(seq, { follow = false, now = false, scroll = true } = {}) {
    if (follow) this.follow = true;
    this.seq = seq;
    if (this.timeline.selected !== seq || scroll) this.timeline.select(seq, { scroll });
    this.point.dataset.loading = "true";
    this.composer.draw();
    if (now) {
      this.requestPoint.cancel();
      this.loadPoint(seq);
    } else {
      this.requestPoint(seq);
    }
  }

  globalKey(e) {
    if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
    const active = document.activeElement;
    const typing = active && (active.matches("input, textarea, select, [contenteditable]")
      || this.timeline.list.contains(active));
    if (typing || !this.run || document.querySelector("dialog[open]")) return;
    e.preventDefault();
    this.timeline.choose(this.seq + (e.key === "ArrowRight" ? 1 : -1));
  }

  stateAt(seq) {
    let cached = this.states.get(seq);
    if (!cached) {
      cached = getJSON(paths.state(this.runId), { query: { seq } });
      cached.catch(() => this.states.delete(seq));
      this.states.set(seq, cached);
      if (this.states.size > 400) this.states.delete(this.states.keys().next().value);
    }
    return cached;
  }

  async loadPoint(seq) {
    const ticket = ++this.pointTicket;
    const runId = this.runId;
    let now;
    let before = null;
    try {
      [now, before] = await Promise.all([
        this.stateAt(seq),
        seq >= 0 ? this.stateAt(seq - 1) : Promise.resolve(null),
        seq >= 0 && !this.timeline.get(seq) ? this.loadPage(Math.floor(seq / PAGE)) : null,
      ]);
    } catch (error) {
      if (ticket !== this.pointTicket || runId !== this.runId) return;
      delete this.point.dataset.loading;
      this.app.inline(error, this.messages);
      return;
    }
    if (ticket !== this.pointTicket || runId !== this.runId || this.destroyed) return;
    this.drawPoint(seq, now, before);
  }

  drawPoint(seq, now, before) {
    const event = seq >= 0 ? this.timeline.get(seq) : null;
    const changes = before ? diff(before.state, now.state) : [];
    const earlier = new Map((before?.messages || []).map((m) => [m.id, JSON.stringify(m)]));
    let newMessages = 0;
    let changedMessages = 0;
    if (before) {
      for (const m of now.messages) {
        const old = earlier.get(m.id);
        if (old === undefined) newMessages++;
        else if (old !== JSON.stringify(m)) changedMessages++;
      }
    }
    const summary = [];
    const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
    if (newMessages) summary.push(plural(newMessages, "new message", "new messages"));
    if (changedMessages) summary.push(plural(changedMessages, "message changed", "messages changed"));
    if (changes.length) {
      summary.push(plural(changes.length, "state path changed", "state paths changed"));
    }
    replace(this.pointHead,
      h("div", { class: "point-title" },
        seq < 0
          ? h("span", {}, h("b", {}, "Start"), " · the run's input")
          : h("span", {}, "After ", h("b", {}, `#${seq}`), " ",
            h("span", { class: "mono" }, event?.type || "…")),
        this.run?.status === "running" ? h("span", { class: "live-tag" }, "live") : null),
      h("div", { class: "point-changes muted" },
        seq < 0 ? `${now.messages.length} message${now.messages.length === 1 ? "" : "s"} given`
          : summary.length ? `Changed by this event: ${summary.join(", ")}` : "No visible change"),
      now.problems?.length
        ? h("ul", { class: "problems", "aria-label": "Problems met while folding the events" },
          now.problems.map((p) => h("li", {}, typeof p === "string" ? p
            : `${Number.isInteger(p.index) ? `event #${p.index}: ` : ""}${p.message || JSON.stringify(p)}`)))
        : null);

    const scroller = this.messages;
    const atBottom = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 40;
    replace(this.messages, conversation(now.messages, before ? before.messages : null,
      now.pendingInterrupts, {
        edit: (m) => this.composer.startEdit(m),
        regenerate: (m) => this.composer.regenerate(m),
        opened: this.opened,
      }));
    const highlighted = this.messages.querySelector(".is-new, .is-changed");
    const found = this.marks ? highlight(this.messages, this.marks) : null;
    if (found) found.scrollIntoView({ block: "center" });
    else if (this.follow || atBottom) scroller.scrollTop = scroller.scrollHeight;
    else if (highlighted) highlighted.scrollIntoView({ block: "nearest" });

    const marks = new Map(changes.filter((c) => c.op !== "remove").map((c) => [c.path, c.op]));
    replace(this.diffList, changes.map((c) =>
      h("li", { class: `diff-${c.op}` },
        h("span", { class: "diff-op", "aria-label": c.op }, { add: "+", remove: "−", replace: "~" }[c.op]),
        h("span", { class: "mono" }, c.path || "(whole state)"), " ",
        h("span", { class: "muted" }, c.op === "replace" ? `${short(c.from)} → ${short(c.to)}`
          : c.op === "add" ? short(c.to) : short(c.from)))));
    this.shownState = { value: now.state, marks };
    this.drawState();
    this.point.dataset.shownSeq = String(seq);
    this.point.dataset.shownRun = this.runId;
    delete this.point.dataset.loading;
  }

  setStateMode(mode) {
    this.stateMode = mode;
    this.treeButton.setAttribute("aria-pressed", String(mode === "tree"));
    this.jsonButton.setAttribute("aria-pressed", String(mode === "json"));
    this.drawState();
  }

  drawState() {
    if (!this.shownState) return;
    const { value, marks } = this.shownState;
    if (this.stateMode === "json") {
      replace(this.stateBody, h("pre", { class: "json-raw", id: "state-json" },
        JSON.stringify(value, null, 2)));
    } else {
      replace(this.stateBody, jsonTree(value, { marks }));
    }
  }
}
