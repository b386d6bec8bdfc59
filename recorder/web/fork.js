// The fork composer: fork at the selected point (with a user message to add, or not), edit an
// earlier user message (its turn runs again with the new text), or regenerate an assistant
// message (its turn runs again as it was). "Fork here" goes where the agent's strategy says
// (a new thread, or this one); "Fork into a new thread" always starts a new thread. The new
// run streams in through the thread view like any live run.

import { getJSON, paths, request } from "./api.js";
import { h, replace, shortId } from "./dom.js";
import { threadHash } from "./lineage.js";

let agents = null; // the configured agents' strategies, asked for once per page

function strategies() {
  agents ??= getJSON(paths.agents())
    .then((data) => new Map(data.agents.map((a) => [a.name, a.fork])))
    .catch(() => {
      agents = null;
      return new Map();
    });
  return agents;
}

// A header the recorder percent-encodes when the id is not printable ASCII.
function headerText(value) {
  try {
    return decodeURIComponent(value || "");
  } catch {
    return value || "";
  }
}

const said = {
  "new-thread": "into a new thread",
  "same-thread": "on this thread",
};

export class Composer {
  // view: the ThreadView (runId, run, seq, threadId, app, reloadThread, hashFor)
  constructor(view) {
    this.view = view;
    this.edit = null; // {messageId}: the user message being edited
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
    this.strategy = h("div", { class: "composer-strategy muted small", id: "fork-strategy" });
    this.status = h("span", { class: "composer-status", role: "status" });
    this.button = h("button", { type: "submit", class: "primary", id: "fork-button" },
      "Fork here");
    this.newThread = h("button", { type: "button", id: "fork-new-thread",
      title: "Fork into a new thread, whatever the agent's strategy",
      onclick: () => this.fork({ strategy: "new-thread" }) }, "Fork into a new thread");
    this.dialog = h("dialog", { class: "preview" });
    this.root = h("form", {
      class: "composer", "aria-label": "Fork from this point",
      onsubmit: (e) => {
        e.preventDefault();
        this.fork();
      },
    },
      this.where, this.text,
      h("div", { class: "composer-actions" }, this.button, this.newThread,
        h("button", { type: "button", onclick: () => this.preview() }, "Preview input")),
      this.strategy, this.status, this.dialog);
  }

  // Another run is shown: an edit in progress belonged to the previous one.
  reset() {
    if (this.edit) this.text.value = "";
    this.edit = null;
  }

  draw() {
    this.drawStrategy();
    if (this.edit) {
      replace(this.where,
        h("span", {}, "Editing message ", h("span", { class: "mono" }, shortId(this.edit.messageId)),
          ": its turn runs again with this text, from the point before it was sent. "),
        h("button", { type: "button", class: "link", onclick: () => this.cancelEdit() },
          "Cancel edit"));
      return;
    }
    const seq = this.view.seq;
    replace(this.where, "Fork from ", h("b", {}, seq < 0 ? "the start" : `#${seq}`),
      " of this run: the new run starts with the conversation and state shown above.");
  }

  async drawStrategy() {
    const agent = this.view.run?.agent;
    if (!agent) {
      replace(this.strategy);
      return;
    }
    const strategy = (await strategies()).get(agent);
    if (this.view.run?.agent !== agent) return;
    replace(this.strategy, strategy
      ? [`"Fork here" forks ${said[strategy]} (agent ${agent}'s strategy: `,
        h("span", { class: "mono", id: "agent-strategy" }, strategy), ")."]
      : `Agent ${agent} is not configured on this recorder: it cannot be forked here.`);
  }

  startEdit(message) {
    this.edit = { messageId: message.id };
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

  regenerate(message) {
    this.edit = null;
    return this.fork({ regenerate: message.id });
  }

  // The fork's body: the point shown, an edit, or a message to add; then ``extra``.
  request(extra = {}) {
    const body = { atSeq: this.view.seq };
    const text = this.text.value.trim();
    if (extra.regenerate) {
      // the same turn again: nothing to add
    } else if (this.edit) {
      body.edit = { messageId: this.edit.messageId, content: text };
    } else if (text) {
      body.messages = [text];
    }
    return { runId: this.view.runId, body: { ...body, ...extra } };
  }

  async preview(extra = {}) {
    const { runId, body } = this.request(extra);
    try {
      const plan = await getJSON(paths.fork(runId), {
        method: "POST", body: { ...body, dryRun: true },
      });
      const point = plan.parentSeq === null ? "its end"
        : plan.parentSeq < 0 ? "its start" : `#${plan.parentSeq}`;
      replace(this.dialog,
        h("div", { class: "pane-head" }, h("h2", {}, "The new run's input"),
          h("button", { type: "button", onclick: () => this.dialog.close() }, "Close")),
        h("p", { class: "muted small", id: "preview-where" },
          `agent ${plan.agent} · ${plan.strategy}: thread ${plan.threadId} · from run `,
          h("span", { class: "mono" }, shortId(plan.parentRunId)), ` at ${point}`),
        h("pre", { class: "json-raw" }, JSON.stringify(plan.input, null, 2)));
      this.dialog.showModal();
    } catch (error) {
      this.view.app.inline(error, this.status);
    }
  }

  async fork(extra = {}) {
    const view = this.view;
    if (!view.run || this.button.disabled) return;
    const { runId, body } = this.request(extra);
    this.setBusy(true);
    this.status.textContent = "Starting the fork…";
    try {
      const response = await request(paths.fork(runId), {
        method: "POST", body, accept: "text/event-stream",
      });
      const created = response.headers.get("x-recorder-run-id");
      const strategy = response.headers.get("x-recorder-fork-strategy");
      const thread = headerText(response.headers.get("x-recorder-thread-id"));
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
      const notice = `Forked ${said[strategy] || ""} (${strategy}): run ${shortId(created)}.`;
      if (thread && thread !== view.threadId) {
        view.app.notify(thread, notice);
        view.app.go(threadHash(thread, created));
        return;
      }
      view.notice = notice;
      await view.reloadThread();
      view.app.go(view.hashFor(created));
    } catch (error) {
      this.status.textContent = "";
      view.app.inline(error, this.where);
    } finally {
      this.setBusy(false);
    }
  }

  setBusy(busy) {
    this.button.disabled = busy;
    this.newThread.disabled = busy;
  }
}
