// The conversation as a frontend shows it: user and assistant messages, tool calls with their
// arguments and results, reasoning collapsed, activity messages, pending interrupts.
//
// Every rendered message carries data-msg-id and data-role; its text sits in .msg-text.

import { h, pretty } from "./dom.js";

function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return content === undefined || content === null ? "" : pretty(content);
  return content
    .map((part) => (part && part.type === "text" ? part.text : `[${part?.type || "part"}]`))
    .join("\n");
}

function attachments(content) {
  if (!Array.isArray(content)) return null;
  const others = content.filter((p) => p && p.type !== "text");
  if (!others.length) return null;
  return h("div", { class: "chips" },
    others.map((p) => h("span", { class: "chip" }, p.type, p.mimeType ? ` ${p.mimeType}` : "",
      p.filename ? ` ${p.filename}` : "")));
}

function changeClass(message, before) {
  if (!before) return "";
  const old = before.get(message.id);
  if (old === undefined) return " is-new";
  return old === JSON.stringify(message) ? "" : " is-changed";
}

function changeTag(cls) {
  if (cls === " is-new") return h("span", { class: "change-tag" }, "new");
  if (cls === " is-changed") return h("span", { class: "change-tag" }, "changed");
  return null;
}

function roleLabel(role, extra) {
  return h("div", { class: "msg-role" }, role, extra ? h("span", { class: "muted" }, extra) : null);
}

function toolResult(message, before) {
  const cls = changeClass(message, before);
  return h("div", { class: `tool-result${cls}`, dataset: { msgId: message.id, role: "tool" } },
    h("div", { class: "tool-label" }, "result", changeTag(cls)),
    h("pre", { class: "msg-text" }, textOf(message.content)),
    message.error ? h("div", { class: "tool-error" }, `error: ${message.error}`) : null);
}

function toolCall(call, results, before) {
  const fn = call.function || {};
  const result = results.get(call.id);
  return h("div", { class: "tool-call", dataset: { toolCallId: call.id } },
    h("div", { class: "tool-head" }, h("span", { class: "tool-icon", "aria-hidden": "true" }, "ƒ"),
      h("span", { class: "tool-name" }, fn.name || "(unnamed tool)"),
      h("span", { class: "muted tool-id" }, call.id)),
    h("pre", { class: "tool-args" }, pretty(fn.arguments ?? "")),
    result ? toolResult(result, before) : h("div", { class: "tool-pending muted" }, "no result yet"));
}

function message(m, results, before, actions) {
  const cls = changeClass(m, before);
  const base = { dataset: { msgId: m.id, role: m.role } };
  switch (m.role) {
    case "user":
      return h("article", { ...base, class: `msg msg-user${cls}` },
        h("div", { class: "msg-role" }, "user", m.name ? h("span", { class: "muted" }, m.name) : null,
          actions.edit ? h("button", { type: "button", class: "link edit-msg",
            title: "Fork from the point before this message, with an edited text",
            onclick: () => actions.edit(m) }, "Edit & fork") : null),
        changeTag(cls),
        h("div", { class: "msg-text" }, textOf(m.content)), attachments(m.content));
    case "assistant":
      return h("article", { ...base, class: `msg msg-assistant${cls}` },
        h("div", { class: "msg-role" }, "assistant",
          m.name ? h("span", { class: "muted" }, m.name) : null,
          actions.regenerate ? h("button", { type: "button", class: "link regenerate-msg",
            title: "Run the turn that produced this message again, from right before it",
            onclick: () => actions.regenerate(m) }, "Regenerate") : null),
        changeTag(cls),
        m.content !== undefined && m.content !== null && m.content !== ""
          ? h("div", { class: "msg-text" }, textOf(m.content)) : null,
        (m.toolCalls || []).map((call) => toolCall(call, results, before)));
    case "reasoning":
      return h("details", { ...base, class: `msg msg-reasoning${cls}`,
        open: actions.opened?.has(m.id),
        ontoggle: (e) => actions.opened?.[e.target.open ? "add" : "delete"](m.id) },
        h("summary", {}, "Reasoning", changeTag(cls)),
        h("div", { class: "msg-text" }, textOf(m.content)));
    case "activity":
      return h("article", { ...base, class: `msg msg-activity${cls}` },
        roleLabel("activity", m.activityType), changeTag(cls),
        h("pre", { class: "msg-text" }, pretty(m.content)));
    case "tool":
      return h("article", { class: `msg msg-tool${cls}` }, roleLabel("tool result", m.toolCallId),
        toolResult(m, before));
    default:
      return h("article", { ...base, class: `msg msg-system${cls}` },
        roleLabel(m.role || "message", m.name), changeTag(cls),
        h("div", { class: "msg-text" }, textOf(m.content)));
  }
}

// before: the messages at the previous point (null: nothing to compare with).
export function conversation(messages, before, pending, actions = {}) {
  const beforeById = before ? new Map(before.map((m) => [m.id, JSON.stringify(m)])) : null;
  const calls = new Set();
  for (const m of messages) {
    if (m.role === "assistant") for (const c of m.toolCalls || []) calls.add(c.id);
  }
  const results = new Map();
  for (const m of messages) if (m.role === "tool" && calls.has(m.toolCallId)) results.set(m.toolCallId, m);
  const shown = messages.filter((m) => !(m.role === "tool" && results.get(m.toolCallId) === m));
  const items = shown.map((m) => message(m, results, beforeById, actions));
  if (!messages.length) items.push(h("p", { class: "empty" }, "No messages at this point."));
  for (const interrupt of pending || []) {
    items.push(h("aside", { class: "interrupt", dataset: { interruptId: interrupt.id } },
      h("div", { class: "msg-role" }, "waiting for input",
        interrupt.reason ? h("span", { class: "muted" }, interrupt.reason) : null),
      h("div", { class: "msg-text" }, interrupt.message || interrupt.id),
      h("div", { class: "muted small" }, `interrupt ${interrupt.id}`,
        interrupt.toolCallId ? ` · tool call ${interrupt.toolCallId}` : "")));
  }
  return items;
}
