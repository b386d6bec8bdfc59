// JSON as a collapsible tree, and the difference between two values as JSON Pointer paths.

import { h } from "./dom.js";

const isContainer = (v) => v !== null && typeof v === "object";

export function equal(a, b) {
  if (a === b) return true;
  if (!isContainer(a) || !isContainer(b) || Array.isArray(a) !== Array.isArray(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((k) => Object.hasOwn(b, k) && equal(a[k], b[k]));
}

const escape = (key) => String(key).replaceAll("~", "~0").replaceAll("/", "~1");

// [{op: "add"|"remove"|"replace", path, from?, to?}], ordered by path as met.
export function diff(before, after, path = "", out = []) {
  if (equal(before, after)) return out;
  const sameKind =
    isContainer(before) && isContainer(after) && Array.isArray(before) === Array.isArray(after);
  if (!sameKind) {
    out.push({ op: "replace", path, from: before, to: after });
    return out;
  }
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  for (const key of keys) {
    const child = `${path}/${escape(key)}`;
    if (!Object.hasOwn(before, key)) out.push({ op: "add", path: child, to: after[key] });
    else if (!Object.hasOwn(after, key)) out.push({ op: "remove", path: child, from: before[key] });
    else diff(before[key], after[key], child, out);
  }
  return out;
}

function scalar(value) {
  const kind = value === null ? "null" : typeof value;
  const text = kind === "string" ? JSON.stringify(value) : String(value);
  return h("span", { class: `json-${kind}` }, text);
}

function preview(value) {
  const n = Array.isArray(value) ? value.length : Object.keys(value).length;
  const noun = Array.isArray(value) ? (n === 1 ? "item" : "items") : n === 1 ? "key" : "keys";
  return h("span", { class: "json-preview" }, Array.isArray(value) ? "[" : "{", ` ${n} ${noun} `,
    Array.isArray(value) ? "]" : "}");
}

// marks: Map(path -> "add" | "replace") of nodes to highlight; containers holding a marked
// path are opened so the change is in sight.
export function jsonTree(value, { marks = new Map(), openDepth = 2 } = {}) {
  const markedWithin = (path) => {
    for (const p of marks.keys()) if (p === path || p.startsWith(`${path}/`)) return true;
    return false;
  };
  const node = (key, v, path, depth) => {
    const mark = marks.get(path);
    const label = key === null ? null : h("span", { class: "json-key" }, `${key}`);
    const cls = `json-node${mark ? ` mark-${mark}` : ""}`;
    if (!isContainer(v)) {
      return h("div", { class: `${cls} json-leaf`, dataset: { path } }, label, label && ": ",
        scalar(v));
    }
    const entries = Object.entries(v);
    if (entries.length === 0) {
      return h("div", { class: `${cls} json-leaf`, dataset: { path } }, label, label && ": ",
        h("span", { class: "json-empty" }, Array.isArray(v) ? "[]" : "{}"));
    }
    const open = depth < openDepth || markedWithin(path);
    return h("details", { class: cls, open, dataset: { path } },
      h("summary", {}, label, label && ": ", preview(v)),
      h("div", { class: "json-children" },
        entries.map(([k, child]) => node(k, child, `${path}/${escape(k)}`, depth + 1))));
  };
  return h("div", { class: "json-tree" }, node(null, value, "", 0));
}

export function short(value) {
  if (value === undefined) return "∅";
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}…` : text;
}
