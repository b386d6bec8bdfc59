// The run's events as a scrubbable timeline: a slider and a virtualized list.
//
// Only the rows in view exist in the DOM, so a run of 10,000 events scrolls as smoothly as one
// of ten. Row 0 is the point before the first event (seq -1: the run's input). Events arrive
// in pages (or live) through put(); rows not loaded yet show a placeholder and are asked for
// through onNeed(from, to).

import { elapsed, h } from "./dom.js";

const ROW = 28; // px; rows have a fixed height so the list can place them by arithmetic
const OVERSCAN = 12;

function category(type) {
  if (!type) return "other";
  if (type.startsWith("RUN_")) return "run";
  if (type.startsWith("STATE_") || type === "MESSAGES_SNAPSHOT") return "state";
  if (type.startsWith("TOOL_CALL")) return "tool";
  if (type.startsWith("TEXT_MESSAGE")) return "text";
  if (type.startsWith("REASONING") || type.startsWith("THINKING")) return "reasoning";
  if (type.startsWith("ACTIVITY")) return "activity";
  return "other";
}

export class Timeline {
  constructor({ onSelect, onNeed }) {
    this.onSelect = onSelect;
    this.onNeed = onNeed;
    this.count = 0;
    this.events = [];
    this.selected = -1;
    this.start = null;
    this.forks = new Map();
    this.frame = 0;

    this.slider = h("input", {
      type: "range", id: "slider", min: -1, max: -1, value: -1, step: 1,
      "aria-label": "Scrub through the run's events",
      oninput: () => this.choose(Number(this.slider.value)),
    });
    this.marks = h("div", { class: "tl-marks", "aria-hidden": "true" });
    this.label = h("div", { class: "tl-label", "aria-live": "polite" });
    this.spacer = h("div", { class: "tl-spacer" });
    this.list = h("div", {
      class: "tl-list", id: "timeline", role: "listbox", tabindex: 0,
      "aria-label": "Events of the run (arrow keys move through them)",
      onscroll: () => this.schedule(),
      onkeydown: (e) => this.key(e),
      onclick: (e) => {
        const row = e.target.closest(".tl-row");
        if (row) this.choose(Number(row.dataset.seq), { scroll: false });
      },
    }, this.spacer);
    this.count_ = h("span", { class: "muted" });
    this.root = h("section", { class: "pane timeline-pane", "aria-label": "Timeline" },
      h("div", { class: "pane-head" }, h("h2", {}, "Events"), this.count_),
      h("div", { class: "tl-scrub" }, this.slider, this.marks, this.label),
      this.list);
    new ResizeObserver(() => this.schedule()).observe(this.list);
  }

  // Nothing to show (the run could not be loaded).
  clear() {
    this.blank = true;
    this.slider.disabled = true;
    this.events = [];
    this.forks = new Map();
    this.setCount(0);
    this.label.textContent = "";
    this.count_.textContent = "";
    this.schedule();
  }

  reset(run, forks) {
    this.blank = false;
    this.slider.disabled = false;
    this.start = run.createdAt ? Date.parse(run.createdAt) : null;
    this.events = [];
    this.forks = forks;
    this.selected = -1;
    this.setCount(run.eventCount);
    this.drawMarks();
    this.schedule();
    this.list.scrollTop = 0;
  }

  setCount(n) {
    if (n === this.count && this.slider.max === String(n - 1)) return;
    this.count = n;
    this.slider.max = String(n - 1);
    this.spacer.style.height = `${(n + 1) * ROW}px`;
    this.count_.textContent = `${n.toLocaleString()} event${n === 1 ? "" : "s"}`;
    this.drawMarks();
    this.schedule();
  }

  put(seq, event) {
    this.events[seq] = event;
    if (seq === this.selected) this.drawLabel();
    this.schedule();
  }

  get(seq) {
    return this.events[seq];
  }

  drawMarks() {
    const marks = [];
    for (const [seq, runs] of this.forks) {
      if (this.count <= 0) break;
      const mark = h("span", { class: "tl-mark", title: `fork: ${runs.join(", ")}` });
      mark.style.left = `${((seq + 1) / Math.max(1, this.count)) * 100}%`;
      marks.push(mark);
    }
    this.marks.replaceChildren(...marks);
  }

  // A selection made here (click, keys, slider): shown at once, reported to the owner.
  choose(seq, { scroll = true } = {}) {
    const clamped = Math.max(-1, Math.min(this.count - 1, seq));
    this.select(clamped, { scroll });
    this.onSelect(clamped);
  }

  select(seq, { scroll = true } = {}) {
    this.selected = seq;
    this.slider.value = String(seq);
    this.list.setAttribute("aria-activedescendant", `ev-${seq}`);
    if (scroll) this.reveal(seq);
    this.drawLabel();
    this.schedule();
  }

  reveal(seq) {
    const top = (seq + 1) * ROW;
    const view = this.list.clientHeight;
    if (top < this.list.scrollTop) this.list.scrollTop = top;
    else if (top + ROW > this.list.scrollTop + view) this.list.scrollTop = top + ROW - view;
  }

  time(event) {
    if (!event || !event.recordedAt || this.start === null) return "";
    return `+${elapsed(Date.parse(event.recordedAt) - this.start)}`;
  }

  drawLabel() {
    if (this.blank) return;
    const seq = this.selected;
    if (seq < 0) {
      this.label.textContent = "Start: the run's input, before any event";
      return;
    }
    const event = this.events[seq];
    this.label.replaceChildren(
      h("b", {}, `#${seq}`), ` / ${this.count - 1} · `,
      h("span", { class: "mono" }, event ? event.type : "…"),
      event && event.recordedAt ? ` · ${this.time(event)}` : "");
  }

  key(e) {
    const page = Math.max(1, Math.floor(this.list.clientHeight / ROW) - 1);
    const moves = {
      ArrowDown: 1, ArrowRight: 1, ArrowUp: -1, ArrowLeft: -1, PageDown: page, PageUp: -page,
    };
    let target = null;
    if (e.key in moves) target = this.selected + moves[e.key];
    else if (e.key === "Home") target = -1;
    else if (e.key === "End") target = this.count - 1;
    if (target === null) return;
    e.preventDefault();
    this.choose(target);
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  draw() {
    if (this.blank) {
      this.spacer.replaceChildren();
      return;
    }
    const first = Math.max(0, Math.floor(this.list.scrollTop / ROW) - OVERSCAN);
    const visible = Math.ceil((this.list.clientHeight || 600) / ROW) + 2 * OVERSCAN;
    const last = Math.min(this.count, first + visible); // rows first..last, row i = seq i - 1
    const rows = [];
    let missingFrom = null;
    let missingTo = null;
    for (let i = first; i <= last; i++) {
      const seq = i - 1;
      const event = seq >= 0 ? this.events[seq] : null;
      if (seq >= 0 && (!event || !event.recordedAt)) {
        if (missingFrom === null) missingFrom = seq;
        missingTo = seq;
      }
      rows.push(this.row(seq, event, i));
    }
    this.spacer.replaceChildren(...rows);
    if (missingFrom !== null) this.onNeed(missingFrom, missingTo);
  }

  row(seq, event, index) {
    const forks = this.forks.get(seq);
    const selected = seq === this.selected;
    const type = seq < 0 ? "start · run input" : event ? event.type : "…";
    const row = h("div", {
      class: `tl-row cat-${seq < 0 ? "start" : category(event?.type)}${selected ? " selected" : ""}`,
      id: `ev-${seq}`, role: "option", "aria-selected": selected ? "true" : "false",
      dataset: { seq },
    },
      h("span", { class: "tl-seq" }, seq < 0 ? "" : `#${seq}`),
      h("span", { class: "tl-type" }, type),
      forks ? h("span", { class: "tl-fork", title: `forked here: ${forks.join(", ")}` },
        h("span", { class: "fork-icon", "aria-hidden": "true" }), String(forks.length)) : null,
      h("span", { class: "tl-time" }, seq < 0 ? "" : this.time(event)));
    row.style.transform = `translateY(${index * ROW}px)`;
    return row;
  }
}
