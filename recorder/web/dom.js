// Building DOM nodes. Everything recorded is shown as text: no string ever becomes markup.

export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replace(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

// Calls fn once calls stop for ``ms``; with ``maxWait``, at least that often while they go on.
export function debounce(fn, ms, maxWait = Infinity) {
  let timer = null;
  let first = null;
  let last = [];
  const fire = () => {
    clearTimeout(timer);
    timer = null;
    first = null;
    fn(...last);
  };
  const run = (...args) => {
    last = args;
    const now = Date.now();
    if (first === null) first = now;
    clearTimeout(timer);
    if (now - first >= maxWait) fire();
    else timer = setTimeout(fire, Math.min(ms, maxWait - (now - first)));
  };
  run.cancel = () => {
    clearTimeout(timer);
    timer = null;
    first = null;
  };
  return run;
}

const parts = { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" };
const thisYear = new Intl.DateTimeFormat(undefined, parts);
const otherYear = new Intl.DateTimeFormat(undefined, { ...parts, year: "numeric" });

export function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  const format = date.getFullYear() === new Date().getFullYear() ? thisYear : otherYear;
  return format.format(date);
}

export function ago(iso) {
  if (!iso) return "";
  const seconds = (Date.now() - new Date(iso).getTime()) / 1000;
  if (seconds < 45) return "just now";
  const steps = [
    [60, "minute"],
    [3600, "hour"],
    [86400, "day"],
    [2592000, "month"],
    [31536000, "year"],
  ];
  let unit = steps[0];
  for (const step of steps) if (seconds >= step[0]) unit = step;
  const n = Math.round(seconds / unit[0]);
  return `${n} ${unit[1]}${n === 1 ? "" : "s"} ago`;
}

export function elapsed(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  const minutes = Math.floor(ms / 60000);
  const seconds = Math.round((ms % 60000) / 1000);
  return `${minutes}m ${String(seconds).padStart(2, "0")}s`;
}

export function statusBadge(status) {
  return h("span", { class: `status status-${status || "unknown"}` }, status || "unknown");
}

// Long run ids ("run-<32 hex>") stay recognisable: head and tail, the full id as a tooltip.
export function shortId(id, keep = 22) {
  if (!id || id.length <= keep) return id || "";
  const half = Math.floor((keep - 1) / 2);
  return `${id.slice(0, half)}…${id.slice(-half)}`;
}

export function pretty(text) {
  if (typeof text !== "string") return JSON.stringify(text, null, 2);
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
