// Tags, notes and a score on the thread or on the run shown: beside the log, editable here.

import { getJSON, request } from "./api.js";
import { h, replace, when } from "./dom.js";

const enc = encodeURIComponent;

export class AnnotationsPanel {
  constructor(view) {
    this.view = view;
    this.saved = null;
    this.answers = 0;  // answers asked for: the newest one is what is shown
    this.target = "thread"; // or "run": the run the view shows
    this.body = h("div", { class: "annotations-body" });
    this.targetSelect = h("select", { id: "annotate-target", "aria-label": "Annotate",
      onchange: () => {
        this.target = this.targetSelect.value;
        this.draw();
      } },
      h("option", { value: "thread" }, "the thread"), h("option", { value: "run" }, "this run"));
    this.root = h("section", { class: "annotations", id: "annotations",
      "aria-label": "Tags, notes and score" },
      h("div", { class: "pane-head" }, h("h2", {}, "Annotations"), this.targetSelect),
      this.body);
  }

  get base() {
    return this.target === "run" && this.view.runId ? `runs/${enc(this.view.runId)}`
      : `threads/${enc(this.view.threadId)}`;
  }

  current() {
    if (!this.saved) return { tags: {}, notes: [], score: null };
    if (this.target === "run") {
      return this.saved.runs[this.view.runId] || { tags: {}, notes: [], score: null };
    }
    return this.saved;
  }

  async load() {
    const asked = ++this.answers;  // (an answer that comes after a newer one is not shown)
    let saved;
    try {
      saved = await getJSON(`threads/${enc(this.view.threadId)}/annotations`);
    } catch (error) {
      this.view.app.inline(error, this.body);
      return;
    }
    if (asked !== this.answers) return;
    this.saved = saved;
    this.keepDrafts([]);  // (typed while the annotations were on their way: kept)
    this.draw();
  }

  // What is typed but not sent yet survives a redraw (an answer to another form).
  keepDrafts(sent) {
    const drafts = {};
    for (const id of ["tag-key", "tag-value", "note-text"]) {
      const field = this.body.querySelector(`#${id}`);
      if (field && !sent.includes(id)) drafts[id] = field.value;
    }
    this.drafts = drafts;
  }

  async send(method, path, body, sent = []) {
    this.keepDrafts(sent);
    try {
      const answer = await (await request(path, { method, body })).json();
      if (answer.threadId) {
        this.answers++;  // newer than any load still on its way
        this.saved = answer;
      } else await this.load();
      this.error = null;
    } catch (error) {
      this.error = error.message;
    }
    this.keepDrafts(this.error ? [] : sent);
    this.draw();
  }

  draw() {
    const item = this.current();
    const key = h("input", { id: "tag-key", placeholder: "key", "aria-label": "Tag key", size: 8 });
    const value = h("input", { id: "tag-value", placeholder: "value", "aria-label": "Tag value",
      size: 10 });
    const score = h("input", { id: "score-value", type: "number", step: "any",
      "aria-label": "Score", value: item.score ? String(item.score.value) : "" });
    const note = h("textarea", { id: "note-text", rows: 2, placeholder: "Add a note…",
      "aria-label": "Note" });
    for (const [id, field] of [["tag-key", key], ["tag-value", value], ["note-text", note]]) {
      if (this.drafts?.[id]) field.value = this.drafts[id];
    }
    this.drafts = null;
    replace(this.body,
      this.error ? h("p", { class: "error-text", role: "alert" }, this.error) : null,
      h("ul", { class: "tags", id: "tags" }, Object.entries(item.tags).map(([k, v]) =>
        h("li", { class: "chip tag", dataset: { key: k } }, `${k}=${v}`,
          h("button", { type: "button", class: "link", "aria-label": `Remove tag ${k}`,
            onclick: () => this.send("PATCH", `${this.base}/tags`, { [k]: null }) }, "×")))),
      h("form", { class: "tag-form", id: "tag-form", onsubmit: (e) => {
        e.preventDefault();
        if (key.value.trim()) {
          this.send("PATCH", `${this.base}/tags`, { [key.value.trim()]: value.value },
            ["tag-key", "tag-value"]);
        }
      } }, key, value, h("button", { type: "submit" }, "Tag")),
      h("form", { class: "score-form", id: "score-form", onsubmit: (e) => {
        e.preventDefault();
        if (score.value === "") this.send("DELETE", `${this.base}/score`);
        else this.send("PUT", `${this.base}/score`, { value: Number(score.value) });
      } }, h("label", { for: "score-value" }, "Score"), score,
        h("button", { type: "submit" }, "Save")),
      h("ul", { class: "notes", id: "notes" }, item.notes.map((n) =>
        h("li", { class: "note" }, h("p", {}, n.text),
          h("span", { class: "muted small" }, n.author ? `${n.author} · ` : "", when(n.createdAt)),
          h("button", { type: "button", class: "link", "aria-label": "Delete note",
            onclick: () => this.send("DELETE", `notes/${enc(n.noteId)}`) }, "delete")))),
      h("form", { class: "note-form", id: "note-form", onsubmit: (e) => {
        e.preventDefault();
        if (note.value.trim()) {
          this.send("POST", `${this.base}/notes`, { text: note.value }, ["note-text"]);
        }
      } }, note, h("button", { type: "submit" }, "Add note")));
  }
}
