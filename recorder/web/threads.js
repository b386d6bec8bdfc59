// The threads list: search in messages, filters (agent, status, time) and keyset paging.
//
// The filters live in the URL (#/threads?q=…&status=…&cursor=…), so a filtered page can be
// shared; the form stays in place while the results change, so typing keeps its focus.

import { getJSON, paths } from "./api.js";
import { ago, debounce, h, replace, statusBadge, when } from "./dom.js";

const STATUSES = ["running", "finished", "interrupted", "cancelled", "error", "incomplete"];
const FILTERS = ["q", "agent", "status", "since", "until", "tag"];

function latestLine(summary) {
  if (!summary) return "";
  const lines = summary.split("\n").filter((l) => l.trim());
  return lines.at(-1) || "";
}

// datetime-local values carry no zone: they mean the browser's local time.
const toIso = (local) => (local ? new Date(local).toISOString() : "");
function toLocal(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export class ThreadsView {
  constructor(app) {
    this.app = app;
    this.params = new URLSearchParams();
    this.cursors = []; // cursors of the pages before this one, for "Previous"
    this.ticket = 0;
    this.build();
  }

  build() {
    const input = (name, attrs) => h("input", { name, id: `filter-${name}`, ...attrs });
    this.q = input("q", { type: "search", placeholder: "Search the messages…",
      "aria-label": "Search text in messages", autocomplete: "off",
      oninput: debounce(() => this.apply(), 350) });
    this.agent = h("select", { name: "agent", id: "filter-agent", "aria-label": "Agent",
      onchange: () => this.apply() }, h("option", { value: "" }, "All agents"));
    this.status = h("select", { name: "status", id: "filter-status", "aria-label": "Status",
      onchange: () => this.apply() }, h("option", { value: "" }, "Any status"),
      STATUSES.map((s) => h("option", { value: s }, s)));
    this.since = input("since", { type: "datetime-local", "aria-label": "Updated since",
      onchange: () => this.apply() });
    this.until = input("until", { type: "datetime-local", "aria-label": "Updated until",
      onchange: () => this.apply() });
    this.tag = input("tag", { placeholder: "tag key:value", "aria-label": "Tag (key:value)",
      size: 12, onchange: () => this.apply() });
    this.form = h("form", { class: "filters", role: "search",
      onsubmit: (e) => {
        e.preventDefault();
        this.apply();
      } },
      this.q, this.agent, this.status,
      h("label", { class: "time-filter" }, h("span", {}, "from"), this.since),
      h("label", { class: "time-filter" }, h("span", {}, "to"), this.until),
      this.tag,
      h("button", { type: "button", class: "link", onclick: () => this.clear() }, "Clear"));
    this.results = h("div", { class: "results", id: "threads", "aria-live": "polite" });
    this.pager = h("nav", { class: "pager", "aria-label": "Pages" });
    this.root = h("div", { class: "threads-view" },
      h("div", { class: "threads-head" }, h("h1", {}, "Threads"), this.form),
      this.results, this.pager);
    this.loadAgents();
  }

  destroy() {}

  async loadAgents() {
    try {
      const { agents } = await getJSON(paths.agents());
      for (const a of agents) this.agent.append(h("option", { value: a.name }, a.name));
      this.agent.value = this.params.get("agent") || "";
    } catch {
      // the list still works without the agent names
    }
  }

  apply() {
    const next = new URLSearchParams();
    const values = {
      q: this.q.value.trim(), agent: this.agent.value, status: this.status.value,
      since: toIso(this.since.value), until: toIso(this.until.value), tag: this.tag.value.trim(),
    };
    for (const key of FILTERS) if (values[key]) next.set(key, values[key]);
    if (this.params.get("limit")) next.set("limit", this.params.get("limit"));
    this.cursors = [];
    this.app.go(`#/threads${next.size ? `?${next}` : ""}`, { replace: true });
  }

  clear() {
    this.form.reset();
    this.apply();
  }

  update(params) {
    this.params = params;
    if (document.activeElement !== this.q) this.q.value = params.get("q") || "";
    this.agent.value = params.get("agent") || "";
    if (params.get("agent") && this.agent.value !== params.get("agent")) {
      this.agent.append(h("option", { value: params.get("agent") }, params.get("agent")));
      this.agent.value = params.get("agent");
    }
    this.status.value = params.get("status") || "";
    this.since.value = toLocal(params.get("since"));
    this.until.value = toLocal(params.get("until"));
    this.tag.value = params.get("tag") || "";
    return this.load();
  }

  async load() {
    const ticket = ++this.ticket;
    const query = {};
    for (const key of [...FILTERS, "limit", "cursor"]) query[key] = this.params.get(key);
    this.results.setAttribute("aria-busy", "true");
    let page;
    try {
      page = await getJSON(paths.threads(), { query });
    } catch (error) {
      if (ticket === this.ticket) {
        this.results.removeAttribute("aria-busy");
        this.app.inline(error, this.results);
        replace(this.pager);
      }
      return;
    }
    if (ticket !== this.ticket) return;
    this.results.removeAttribute("aria-busy");
    this.draw(page);
  }

  draw(page) {
    const filtered = FILTERS.some((k) => this.params.get(k));
    if (!page.threads.length) {
      replace(this.results, h("div", { class: "empty-state" },
        filtered
          ? [h("p", {}, "No threads match these filters."),
            this.params.get("q") ? h("p", {}, h("a", { href: `#/search?${new URLSearchParams({ q: this.params.get("q") })}`,
              id: "search-content" }, "Search the recorded content instead")) : null]
          : [h("p", {}, "No threads recorded yet."),
            h("p", { class: "muted" }, "Point a frontend at POST /agents/{name}, or run ",
              h("code", {}, "recorder demo --serve"), ".")]));
    } else {
      const rows = page.threads.map((t) => {
        const href = `#/threads/${encodeURIComponent(t.threadId)}`;
        return h("tr", { class: "thread-row", dataset: { threadId: t.threadId },
          onclick: (e) => {
            if (!e.target.closest("a")) this.app.go(href);
          } },
          h("td", { class: "cell-main" },
            h("a", { href, class: "thread-link" }, t.threadId),
            t.forkedFrom?.threadId ? h("span", { class: "forked-tag muted small" },
              " · forked from ", t.forkedFrom.threadId) : null,
            h("div", { class: "summary", title: t.summary || "" },
              latestLine(t.summary) || h("span", { class: "muted" }, "(no messages)"))),
          h("td", { class: "cell-agent" }, t.agent || "—"),
          h("td", { class: "cell-runs num" }, String(t.runCount)),
          h("td", { class: "cell-status" }, statusBadge(t.latestStatus)),
          h("td", { class: "cell-time" },
            h("time", { datetime: t.updatedAt, title: when(t.updatedAt) }, ago(t.updatedAt))));
      });
      replace(this.results, h("table", { class: "threads-table" },
        h("thead", {}, h("tr", {},
          h("th", { scope: "col" }, "Thread · latest message"), h("th", { scope: "col" }, "Agent"),
          h("th", { scope: "col", class: "num" }, "Runs"), h("th", { scope: "col" }, "Status"),
          h("th", { scope: "col" }, "Updated"))),
        h("tbody", {}, rows)));
    }
    const here = this.params.get("cursor");
    const go = (cursor) => {
      const next = new URLSearchParams(this.params);
      if (cursor) next.set("cursor", cursor);
      else next.delete("cursor");
      this.app.go(`#/threads${next.size ? `?${next}` : ""}`);
    };
    replace(this.pager,
      h("button", { type: "button", id: "prev-page", disabled: !here,
        onclick: () => go(this.cursors.pop() || null) }, "← Previous"),
      h("span", { class: "muted" }, here && !this.cursors.length ? "" : `Page ${this.cursors.length + 1}`),
      h("button", { type: "button", id: "next-page", disabled: !page.nextCursor,
        onclick: () => {
          this.cursors.push(here);
          go(page.nextCursor);
        } }, "Next →"));
  }
}
