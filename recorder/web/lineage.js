// Lineage across threads, as the page draws it: where a thread branched off another, and the
// threads that branched off a run. Also the page's addresses of threads, runs and points.

import { h, shortId } from "./dom.js";

const enc = encodeURIComponent;

export const threadHash = (threadId, runId, seq) =>
  `#/threads/${enc(threadId)}${runId ? `/runs/${enc(runId)}` : ""}` +
  (runId && seq !== null && seq !== undefined ? `/events/${seq}` : "");

// "at #N", "at its start" (-1), "after its end" (null): a point of a run, in words.
export function pointText(seq) {
  if (seq === null || seq === undefined) return "after its end";
  return seq < 0 ? "at its start" : `at #${seq}`;
}

// "forked from <thread> · <run> at #N", linking to that point (its run, in its thread).
export function forkedFrom(origin) {
  const label = [h("span", { class: "mono" }, origin.threadId ?? "a run not recorded here"),
    " · ", h("span", { class: "mono", title: origin.runId }, shortId(origin.runId)), " ",
    pointText(origin.seq)];
  const seq = origin.seq === null || origin.seq === undefined ? null : origin.seq;
  return h("div", { class: "forked-from small", id: "forked-from" },
    h("span", { class: "fork-icon", "aria-hidden": "true" }), "forked from ",
    origin.threadId
      ? h("a", { href: threadHash(origin.threadId, origin.runId, seq), class: "origin-link" },
        label)
      : h("span", {}, label));
}

// The threads forked from one run, as links under it in the tree (null: none).
export function threadForks(forks) {
  if (!forks.length) return null;
  return h("ul", { class: "thread-forks", "aria-label": "Threads forked from this run" },
    forks.map((fork) => h("li", {},
      h("a", { class: "thread-fork", href: threadHash(fork.threadId),
        dataset: { threadId: fork.threadId } },
      h("span", { class: "fork-icon", "aria-hidden": "true" }), "thread ",
      h("span", { class: "mono", title: fork.threadId }, shortId(fork.threadId, 20)), " ",
      h("span", { class: "muted" }, pointText(fork.forkedFrom.seq))))));
}
