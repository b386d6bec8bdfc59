// Search in recorded content: hits with their snippets; a hit opens its thread at the hit's
// event with the matched words marked in the conversation.
//
//   #/search?q=&kind=&agent=&tool=&tag=&syntax=1&cursor=

import { getJSON } from "./api.js";
import { debounce, h, replace, shortId, when } from "./dom.js";

const KINDS = [
  ["", "Anything"],
  ["message", "Messages"],
  ["tool_call", "Tool calls"],
  ["reasoning", "Reasoning"],
  ["error", "Errors"],
  ["input", "Posted input"],
];
const FILTERS = ["q", "kind", "agent", "tool", "tag", "syntax"];

// The API's highlight offsets count code points (Python string indices); JavaScript strings
// index UTF-16 code units, and a character outside the BMP (an emoji, "𝒳") takes two. These
// are the highlights as [start, end] UTF-16 indices into ``text``.
export function utf16Ranges(text, highlights) {
  const units = [0]; // units[i]: the UTF-16 index where code point i starts
  for (const char of text) units.push(units[units.length - 1] + char.length);
  const at = (offset) => units[Math.max(0, Math.min(offset, units.length - 1))];
  return highlights.map(([start, end]) => [at(start), at(end)]);
}

// The snippet as text nodes, with each highlighted range in a <mark>.
export function marked(text, highlights) {
  const out = [];
  let at = 0;
  for (const [start, end] of utf16Ranges(text, highlights).sort((a, b) => a[0] - b[0])) {
    if (start < at) continue;
    out.push(text.slice(at, start), h("mark", {}, text.slice(start, end)));
    at = end;
  }
  out.push(text.slice(at));
  return out;
}

export function hitHash(hit) {
  const seq = hit.seqFrom < 0 ? -1 : hit.seqTo;
  const words = [...new Set(utf16Ranges(hit.snippet, hit.highlights)
    .map(([s, e]) => hit.snippet.slice(s, e)))];
  const query = words.length ? `?${new URLSearchParams({ hl: words.join("\n") })}` : "";
  return `#/threads/${encodeURIComponent(hit.threadId)}/runs/${encodeURIComponent(hit.runId)}` +
    `/events/${seq}${query}`;
}

export class SearchView {
  constructor(app) {
    this.app = app;
    this.params = new URLSearchParams();
    this.cursors = [];
    this.ticket = 0;
    this.build();
  }

  build() {
    const input = (name, attrs) => h("input", { name, id: `search-${name}`, ...attrs });
    this.q = input("q", { type: "search", placeholder: "Words in messages, tool calls, errors…",
      "aria-label": "Search recorded content", autocomplete: "off",
      oninput: debounce(() => this.apply(), 350) });
    this.kind = h("select", { name: "kind", id: "search-kind", "aria-label": "Kind",
      onchange: () => this.apply() }, KINDS.map(([v, label]) => h("option", { value: v }, label)));
    this.agent = input("agent", { placeholder: "agent", "aria-label": "Agent", size: 10,
      onchange: () => this.apply() });
    this.tool = input("tool", { placeholder: "tool name", "aria-label": "Tool name", size: 12,
      onchange: () => this.apply() });
    this.tag = input("tag", { placeholder: "key:value", "aria-label": "Tag", size: 12,
      onchange: () => this.apply() });
    this.syntax = input("syntax", { type: "checkbox", onchange: () => this.apply() });
    this.form = h("form", { class: "filters", role: "search", id: "search-form",
      onsubmit: (e) => {
        e.preventDefault();
        this.apply();
      } },
      this.q, this.kind, this.agent, this.tool, this.tag,
      h("label", { class: "time-filter", title: '"a phrase", OR, -excluded, prefix*' },
        this.syntax, h("span", {}, "query syntax")));
    this.results = h("ol", { class: "hits", id: "hits", "aria-live": "polite" });
    this.pager = h("nav", { class: "pager", "aria-label": "Pages" });
    this.root = h("div", { class: "threads-view search-view" },
      h("div", { class: "threads-head" }, h("h1", {}, "Search"), this.form),
      this.results, this.pager);
  }

  destroy() {}

  apply() {
    const next = new URLSearchParams();
    const values = { q: this.q.value.trim(), kind: this.kind.value, agent: this.agent.value.trim(),
      tool: this.tool.value.trim(), tag: this.tag.value.trim(), syntax: this.syntax.checked ? "1" : "" };
    for (const key of FILTERS) if (values[key]) next.set(key, values[key]);
    this.cursors = [];
    this.app.go(`#/search${next.size ? `?${next}` : ""}`, { replace: true });
  }

  update(params) {
    this.params = params;
    if (document.activeElement !== this.q) this.q.value = params.get("q") || "";
    this.kind.value = params.get("kind") || "";
    this.agent.value = params.get("agent") || "";
    this.tool.value = params.get("tool") || "";
    this.tag.value = params.get("tag") || "";
    this.syntax.checked = params.get("syntax") === "1";
    return this.load();
  }

  async load() {
    const ticket = ++this.ticket;
    const p = this.params;
    const query = { q: p.get("q"), kind: p.get("kind"), agent: p.get("agent"), tool: p.get("tool"),
      tag: p.get("tag"), syntax: p.get("syntax") === "1" ? "true" : null, cursor: p.get("cursor") };
    if (!FILTERS.some((k) => p.get(k))) {
      replace(this.results, h("li", { class: "empty-state" },
        h("p", {}, "Search what agents said, the tools they called, their errors and what users posted.")));
      replace(this.pager);
      return;
    }
    this.results.setAttribute("aria-busy", "true");
    let page;
    try {
      page = await getJSON("search", { query });
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
    if (!page.hits.length) {
      replace(this.results, h("li", { class: "empty-state" }, h("p", {}, "No hits.")));
    } else {
      replace(this.results, page.hits.map((hit) => {
        const href = hitHash(hit);
        const where = hit.seqFrom < 0 ? "input" : hit.seqFrom === hit.seqTo ? `#${hit.seqFrom}`
          : `#${hit.seqFrom}–${hit.seqTo}`;
        return h("li", { class: "hit", dataset: { threadId: hit.threadId, runId: hit.runId } },
          h("div", { class: "hit-head" },
            h("a", { href, class: "hit-link mono" }, hit.threadId),
            h("span", { class: "muted mono", title: hit.runId }, shortId(hit.runId)),
            h("span", { class: "muted" }, where),
            h("span", { class: `chip kind-${hit.kind}` }, hit.kind.replace("_", " ")),
            hit.toolName ? h("span", { class: "chip" }, hit.toolName) : null,
            hit.errorCode ? h("span", { class: "chip" }, hit.errorCode) : null,
            h("time", { class: "muted small", datetime: hit.recordedAt }, when(hit.recordedAt))),
          h("a", { href, class: "snippet" }, marked(hit.snippet, hit.highlights)));
      }));
    }
    const here = this.params.get("cursor");
    const go = (cursor) => {
      const next = new URLSearchParams(this.params);
      if (cursor) next.set("cursor", cursor);
      else next.delete("cursor");
      this.app.go(`#/search?${next}`);
    };
    replace(this.pager,
      h("button", { type: "button", id: "prev-hits", disabled: !here,
        onclick: () => go(this.cursors.pop() || null) }, "← Previous"),
      h("button", { type: "button", id: "next-hits", disabled: !page.nextCursor,
        onclick: () => {
          this.cursors.push(here);
          go(page.nextCursor);
        } }, "Next →"));
  }
}

// Mark every occurrence of ``words`` (ignoring case) in the text under ``root``.
export function highlight(root, words) {
  const wanted = words.filter(Boolean).map((w) => w.toLowerCase());
  if (!wanted.length) return null;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const nodes = [];
  while (walker.nextNode()) nodes.push(walker.currentNode);
  let first = null;
  for (const node of nodes) {
    const text = node.nodeValue;
    const lower = text.toLowerCase();
    const ranges = [];
    for (const word of wanted) {
      for (let i = lower.indexOf(word); i >= 0; i = lower.indexOf(word, i + word.length)) {
        ranges.push([i, i + word.length]);
      }
    }
    if (!ranges.length || lower.length !== text.length) continue;
    const parts = [];
    let at = 0;
    for (const [start, end] of ranges.sort((a, b) => a[0] - b[0])) {
      if (start < at) continue;
      parts.push(document.createTextNode(text.slice(at, start)));
      const mark = h("mark", { class: "hit-mark" }, text.slice(start, end));
      first ??= mark;
      parts.push(mark);
      at = end;
    }
    parts.push(document.createTextNode(text.slice(at)));
    node.replaceWith(...parts);
  }
  return first;
}
