// The page: hash routes, the shell, the API token prompt, and errors shown as messages.
//
//   #/threads[?q=&agent=&status=&since=&until=&cursor=&limit=]   the threads list
//   #/threads/T                                                   a thread (its latest run)
//   #/threads/T/runs/R                                            a run, at its end (live: following)
//   #/threads/T/runs/R/events/N[?hl=WORDS]                        a run after its event N (-1: start),
//                                                                 WORDS (one a line) marked
//   #/search[?q=&kind=&agent=&tool=&tag=&syntax=1&cursor=]        search in recorded content

import { ApiError, setToken, token } from "./api.js";
import { h, replace } from "./dom.js";
import { SearchView } from "./search.js";
import { ThreadView } from "./thread.js";
import { ThreadsView } from "./threads.js";

const view = document.getElementById("view");
const crumbs = document.getElementById("crumbs");
const tokenArea = document.getElementById("token-area");
let current = null;

function parse(hash) {
  const raw = hash.replace(/^#/, "") || "/threads";
  const [path, query = ""] = raw.split("?");
  const parts = path.split("/").filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  const params = new URLSearchParams(query);
  if (parts.length === 1 && parts[0] === "threads") return { name: "threads", params };
  if (parts.length === 1 && parts[0] === "search") return { name: "search", params };
  if (parts[0] === "threads" && parts.length >= 2) {
    const [, threadId, runs, runId, events, seq] = parts;
    const marks = (params.get("hl") || "").split("\n").filter(Boolean);
    if (parts.length === 2) return { name: "thread", threadId, runId: null, seq: null, marks };
    if (runs === "runs" && runId && parts.length === 4) {
      return { name: "thread", threadId, runId, seq: null, marks };
    }
    if (runs === "runs" && events === "events" && /^-?\d+$/.test(seq || "") && parts.length === 6) {
      return { name: "thread", threadId, runId, seq: Math.max(-1, Number(seq)), marks };
    }
  }
  return { name: "unknown", path: raw };
}

function mount(next) {
  current?.destroy();
  current = next;
  replace(view, next ? next.root : null);
}

function drawCrumbs(route) {
  const items = [h("a", { href: "#/threads" }, "Threads"),
    h("span", { class: "sep", "aria-hidden": "true" }, "·"),
    h("a", { href: "#/search", id: "search-link" }, "Search")];
  if (route.name === "thread") {
    items.push(h("span", { class: "sep", "aria-hidden": "true" }, "/"),
      h("a", { href: `#/threads/${encodeURIComponent(route.threadId)}`, class: "mono" },
        route.threadId));
  }
  replace(crumbs, items);
  document.title = route.name === "thread" ? `${route.threadId} · agui-recorder`
    : route.name === "search" ? "Search · agui-recorder" : "Threads · agui-recorder";
}

function drawTokenArea() {
  replace(tokenArea, token()
    ? [h("span", { class: "muted small" }, "API token set"),
      h("button", { type: "button", class: "link", onclick: () => {
        setToken("");
        drawTokenArea();
        route();
      } }, "Forget")]
    : null);
}

function message(kind, title, text, actions = []) {
  return h("div", { class: `message message-${kind}`, role: "alert" },
    h("h2", {}, title), h("p", {}, text),
    actions.length ? h("div", { class: "message-actions" }, actions) : null);
}

const retry = () => h("button", { type: "button", class: "primary", onclick: () => route() },
  "Try again");
const home = () => h("a", { href: "#/threads", class: "button" }, "All threads");

function explain(error) {
  if (!(error instanceof ApiError)) {
    return message("error", "Something went wrong", String(error?.message || error), [retry()]);
  }
  if (error.kind === "not-found") return message("warn", "Not found", error.message, [home()]);
  if (error.kind === "unreachable") {
    return message("error", "The recorder cannot be reached", error.message, [retry()]);
  }
  return message("error", `The recorder answered ${error.status}`, error.message,
    [retry(), home()]);
}

function askToken(rejected) {
  mount(null);
  const input = h("input", { type: "password", id: "token-input", autocomplete: "off",
    required: true, "aria-describedby": "token-help" });
  const form = h("form", { class: "message token-form", id: "token-form",
    onsubmit: (e) => {
      e.preventDefault();
      setToken(input.value.trim());
      drawTokenArea();
      route();
    } },
    h("h2", {}, "This recorder needs an API token"),
    rejected ? h("p", { class: "error-text", role: "alert" }, "That token was not accepted.") : null,
    h("label", { for: "token-input" }, "API token"),
    input,
    h("p", { class: "muted small", id: "token-help" },
      "Sent as Authorization: Bearer to this recorder only, and kept for this browser tab ",
      "(sessionStorage)."),
    h("div", { class: "message-actions" }, h("button", { type: "submit", class: "primary" },
      "Use token")));
  replace(view, form);
  input.focus();
}

const notices = new Map(); // thread id -> a sentence for the next view of that thread

export const app = {
  // Say something on the next view of a thread (a fork that went there, say).
  notify(threadId, text) {
    notices.set(threadId, text);
  },
  takeNotice(threadId) {
    const text = notices.get(threadId) ?? null;
    notices.delete(threadId);
    return text;
  },
  go(hash, { replace: replacing = false } = {}) {
    if (location.hash === hash) return;
    if (replacing) {
      history.replaceState(null, "", hash);
      route();
    } else {
      location.hash = hash;
    }
  },
  // An error met while a view is shown: a message in place of ``where``, or the token prompt.
  inline(error, where) {
    if (error instanceof ApiError && error.kind === "unauthorized") {
      askToken(Boolean(token()));
      return;
    }
    const box = explain(error);
    box.classList.add("inline");
    replace(where, box);
  },
};

let routing = 0;
async function route() {
  const ticket = ++routing;
  const r = parse(location.hash);
  drawCrumbs(r);
  drawTokenArea();
  try {
    if (r.name === "threads") {
      if (!(current instanceof ThreadsView)) mount(new ThreadsView(app));
      await current.update(r.params);
    } else if (r.name === "search") {
      if (!(current instanceof SearchView)) mount(new SearchView(app));
      await current.update(r.params);
    } else if (r.name === "thread") {
      if (!(current instanceof ThreadView && current.threadId === r.threadId)) {
        const next = new ThreadView(app, r.threadId);
        await next.load();
        if (ticket !== routing) return next.destroy();
        mount(next);
      }
      if (r.marks.length) current.marks = r.marks;
      await current.show(r.runId, r.seq);
    } else {
      mount(null);
      replace(view, message("warn", "No such page", `Nothing lives at #${r.path}.`, [home()]));
    }
  } catch (error) {
    if (ticket !== routing) return;
    if (error instanceof ApiError && error.kind === "unauthorized") {
      askToken(Boolean(token()));
      return;
    }
    if (error instanceof ApiError && error.kind === "not-found" && r.name === "thread") {
      error.message = `There is no thread "${r.threadId}" in this recorder.`;
    }
    mount(null);
    replace(view, explain(error));
  }
}

window.addEventListener("hashchange", route);
window.addEventListener("unhandledrejection", (e) => {
  if (e.reason instanceof ApiError && e.reason.kind === "unauthorized") askToken(Boolean(token()));
});
if (!location.hash) history.replaceState(null, "", "#/threads");
route();
