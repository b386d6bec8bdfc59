// The fork composer: add a user message at the selected point (or edit an earlier one) and
// fork; the new run streams in through the thread view like any live run.

import { getJSON, paths, request } from "./api.js";
import { h, replace, shortId } from "./dom.js";

export class Composer {
  // view: the ThreadView (runId, run, seq, threadId, app, reloadThread, hashFor)
  constructor(view) {
    this.view = view;
    this.edit = null; // {runId, seq}: the point before the message being edited
    this.text = h("textarea", {
      id: "fork-text", rows: 2, placeholder: "A user message to add (optional)",
      "aria-label": "User message for the fork",
      onkeydown: (e) => {
        if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
          e.preventDefault();
          this.fork();
        }
      },
    });
    this.where = h("div", { class: "composer-where" });
    this.status = h("span", { class: "composer-status", role: "status" });
    this.button = h("button", { type: "submit", class: "primary", id: "fork-button" },
      "Fork here");
    this.dialog = h("dialog", { class: "preview" });
    this.root = h("form", {
      class: "composer", "aria-label": "Fork from this point",
      onsubmit: (e) => {
        e.preventDefault();
        this.fork();
      },
    },
      this.where, this.text,
      h("div", { class: "composer-actions" }, this.button,
        h("button", { type: "button", onclick: () => this.preview() }, "Preview input")),
      this.status, this.dialog);
  }

  // Another run is shown: an edit in progress belonged to the previous one.
  reset() {
    if (this.edit) this.text.value = "";
    this.edit = null;
  }

  draw() {
    if (this.edit) {
      replace(this.where,
        h("span", {}, "Editing a message: forks from ", h("span", { class: "mono" },
          shortId(this.edit.runId)), ` at #${this.edit.seq}, before it was sent. `),
        h("button", { type: "button", class: "link", onclick: () => this.cancelEdit() },
          "Cancel edit"));
      return;
    }
    const seq = this.view.seq;
    replace(this.where, "Fork from ", h("b", {}, seq < 0 ? "the start" : `#${seq}`),
      " of this run: the new run starts with the conversation and state shown above.");
  }

  async startEdit(message) {
    this.status.textContent = "Finding the point before this message…";
    let point;
    try {
      point = await this.pointBefore(message.id);
    } catch (error) {
      this.status.textContent = "";
      this.view.app.inline(error, this.where);
      return;
    }
    if (!point) {
      this.status.textContent =
        "This message starts the thread: there is no earlier point to fork from.";
      return;
    }
    this.edit = point;
    this.status.textContent = "";
    this.text.value = typeof message.content === "string" ? message.content : "";
    this.draw();
    this.text.focus();
  }

  cancelEdit() {
    this.edit = null;
    this.text.value = "";
    this.draw();
  }

  // The latest point on the selected run's ancestry where the message did not exist yet.
  async pointBefore(messageId) {
    let run = this.view.run;
    let seq = this.view.seq;
    for (let hop = 0; hop < 100 && run; hop++) {
      const given = (run.input?.messages || []).some((m) => m.id === messageId);
      if (!given) {
        const first = await this.firstMention(run.runId, messageId, seq);
        return first === null ? null : { runId: run.runId, seq: first - 1 };
      }
      if (!run.parentRunId) return null;
      const parent = await getJSON(paths.run(run.parentRunId));
      const at = run.parentSeq ?? parent.eventCount - 1;
      const there = await getJSON(paths.state(parent.runId), { query: { seq: at } });
      if (!there.messages.some((m) => m.id === messageId)) return { runId: parent.runId, seq: at };
      run = parent;
      seq = at;
    }
    return null;
  }

  async firstMention(runId, messageId, upTo) {
    let after = -1;
    while (after < upTo) {
      const data = await getJSON(paths.events(runId), { query: { afterSeq: after, limit: 10000 } });
      for (const e of data.events) {
        if (e.seq > upTo) return null;
        const ev = e.event || {};
        if (ev.messageId === messageId) return e.seq;
        if (Array.isArray(ev.messages) && ev.messages.some((m) => m && m.id === messageId)) {
          return e.seq;
        }
      }
      if (data.nextAfterSeq === null || data.nextAfterSeq === undefined) return null;
      after = data.nextAfterSeq;
    }
    return null;
  }

  request() {
    const where = this.edit || { runId: this.view.runId, seq: this.view.seq };
    const text = this.text.value.trim();
    return { runId: where.runId, body: { atSeq: where.seq, messages: text ? [text] : [] } };
  }

  async preview() {
    const { runId, body } = this.request();
    try {
      const plan = await getJSON(paths.fork(runId), {
        method: "POST", body: { ...body, dryRun: true },
      });
      replace(this.dialog,
        h("div", { class: "pane-head" }, h("h2", {}, "The new run's input"),
          h("button", { type: "button", onclick: () => this.dialog.close() }, "Close")),
        h("p", { class: "muted small" }, `agent ${plan.agent} · fork point #${plan.parentSeq}`),
        h("pre", { class: "json-raw" }, JSON.stringify(plan.input, null, 2)));
      this.dialog.showModal();
    } catch (error) {
      this.view.app.inline(error, this.status);
    }
  }

  async fork() {
    const view = this.view;
    if (!view.run || this.button.disabled) return;
    const { runId, body } = this.request();
    this.button.disabled = true;
    this.status.textContent = "Starting the fork…";
    try {
      const response = await request(paths.fork(runId), {
        method: "POST", body, accept: "text/event-stream",
      });
      const created = response.headers.get("x-recorder-run-id");
      // The recorder streams the new run back; the view follows it from the log like any
      // run, so this copy is only drained.
      response.body?.pipeTo(new WritableStream()).catch(() => {});
      if (!created) {
        this.status.textContent = `The agent answered ${response.status} without a stream.`;
        return;
      }
      this.status.textContent = "";
      this.text.value = "";
      this.edit = null;
      await view.reloadThread();
      view.app.go(view.hashFor(created));
    } catch (error) {
      this.status.textContent = "";
      view.app.inline(error, this.where);
    } finally {
      this.button.disabled = false;
    }
  }
}
