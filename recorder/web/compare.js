// Compare two points: this one and another of any run of the thread (a fork, say), with the
// recorder's diff (GET /runs/{id}/diff): the state's JSON Patch and the messages changed.

import { getJSON } from "./api.js";
import { h, replace } from "./dom.js";

const enc = encodeURIComponent;

function text(message) {
  const c = message.content;
  const body = typeof c === "string" ? c : JSON.stringify(c ?? "");
  return `${message.role || "?"}: ${body.length > 120 ? `${body.slice(0, 119)}…` : body}`;
}

export class ComparePanel {
  constructor(view) {
    this.view = view;
    this.runSelect = h("select", { id: "compare-run", "aria-label": "Compare with run" });
    this.seqInput = h("input", { id: "compare-seq", type: "number", min: -1, placeholder: "end",
      "aria-label": "After event (empty: the end)", size: 5 });
    this.result = h("div", { class: "compare-result", id: "compare-result", "aria-live": "polite" });
    this.root = h("section", { class: "compare", "aria-label": "Compare with another point" },
      h("div", { class: "pane-head" }, h("h2", {}, "Compare")),
      h("form", { id: "compare-form", class: "compare-form", onsubmit: (e) => {
        e.preventDefault();
        this.compare();
      } }, h("span", { class: "muted small" }, "this point →"), this.runSelect, this.seqInput,
      h("button", { type: "submit" }, "Diff")),
      this.result);
  }

  drawRuns() {
    const chosen = this.runSelect.value;
    replace(this.runSelect, [...this.view.nodes.keys()].map((id) =>
      h("option", { value: id }, id)));
    this.runSelect.value = chosen || this.view.runId || "";
  }

  async compare() {
    const target = this.runSelect.value;
    const query = { from: this.view.seq, toRun: target, toSeq: this.seqInput.value };
    let diff;
    try {
      diff = await getJSON(`runs/${enc(this.view.runId)}/diff`, { query });
    } catch (error) {
      this.view.app.inline(error, this.result);
      return;
    }
    const { added, removed, changed } = diff.messages;
    replace(this.result,
      h("ul", { class: "diff", id: "compare-patch" }, diff.patch.length
        ? diff.patch.map((op) => h("li", { class: `diff-${op.op}` },
          h("span", { class: "mono" }, `${op.op} ${op.path || "/"}`), " ",
          h("span", { class: "muted" }, "value" in op ? JSON.stringify(op.value) : "")))
        : h("li", { class: "muted" }, "state: no change")),
      h("ul", { class: "diff", id: "compare-messages" },
        added.map((m) => h("li", { class: "diff-add" }, `+ ${text(m)}`)),
        removed.map((m) => h("li", { class: "diff-remove" }, `− ${text(m)}`)),
        changed.map((c) => h("li", { class: "diff-replace" }, `~ ${text(c.after)}`)),
        added.length + removed.length + changed.length ? null
          : h("li", { class: "muted" }, "messages: no change")));
  }
}
