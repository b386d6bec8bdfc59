// The recorder's public HTTP API, as the page uses it: JSON requests, the API token, and SSE.
//
// Paths are relative to the page, so a recorder behind a path prefix works unchanged.

const TOKEN_KEY = "agui-recorder.token";

export class ApiError extends Error {
  // kind: "unauthorized" (401), "not-found" (404), "unreachable" (no answer), "http" (other)
  constructor(kind, status, message) {
    super(message);
    this.kind = kind;
    this.status = status;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export function url(path, query = {}) {
  const target = new URL(path, document.baseURI);
  for (const [key, value] of Object.entries(query)) {
    if (value !== null && value !== undefined && value !== "") target.searchParams.set(key, value);
  }
  return target;
}

function headers(extra = {}) {
  const out = { ...extra };
  const current = token();
  if (current) out.Authorization = `Bearer ${current}`;
  return out;
}

export async function request(path, { method = "GET", query, body, signal, accept } = {}) {
  const init = { method, signal, headers: headers(accept ? { Accept: accept } : {}) };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  let response;
  try {
    response = await fetch(url(path, query), init);
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(
      "unreachable",
      0,
      `The recorder at ${location.origin} cannot be reached. Is it still running?`,
    );
  }
  if (!response.ok) throw await failure(response);
  return response;
}

export async function getJSON(path, options) {
  return (await request(path, options)).json();
}

async function failure(response) {
  let detail = response.statusText || "error";
  try {
    const body = await response.json();
    if (body && body.detail !== undefined) {
      detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
    }
  } catch {
    // not JSON: keep the status text
  }
  const kind =
    response.status === 401 ? "unauthorized" : response.status === 404 ? "not-found" : "http";
  return new ApiError(kind, response.status, detail);
}

const enc = encodeURIComponent;
export const paths = {
  threads: () => "threads",
  thread: (id) => `threads/${enc(id)}`,
  run: (id) => `runs/${enc(id)}`,
  events: (id) => `runs/${enc(id)}/events`,
  state: (id) => `runs/${enc(id)}/state`,
  stream: (id) => `runs/${enc(id)}/stream`,
  fork: (id) => `runs/${enc(id)}/fork`,
  agents: () => "agents",
};

// Split an SSE byte stream into frames ({id, data}); LF, CRLF and CR line ends, multi-line data.
export async function* frames(body, signal) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let id = null;
  let data = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      const lines = buffer.split(/\r\n|\r|\n/);
      buffer = lines.pop();
      for (const line of lines) {
        if (line === "") {
          if (data.length) yield { id, data: data.join("\n") };
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value_ = colon < 0 ? "" : line.slice(colon + 1);
        if (value_.startsWith(" ")) value_ = value_.slice(1);
        if (field === "data") data.push(value_);
        else if (field === "id") id = value_;
      }
    }
  } finally {
    if (!signal?.aborted) reader.cancel().catch(() => {});
  }
}

// Follow a run's stream after ``afterSeq``: EventSource when no token is needed (it cannot send
// headers), fetch streaming otherwise. ``onEvent(seq, data)`` per frame, ``onClose()`` once when
// the stream ends or breaks; the caller decides whether the run is still going.
export function followRun(runId, afterSeq, { onEvent, onClose }) {
  let closed = false;
  const finish = () => {
    if (closed) return;
    closed = true;
    onClose();
  };
  if (!token() && "EventSource" in window) {
    const source = new EventSource(url(paths.stream(runId), { afterSeq }));
    source.onmessage = (message) => onEvent(Number(message.lastEventId), message.data);
    // EventSource would reconnect on its own, from its first URL: stop it, the caller resumes.
    source.onerror = () => {
      source.close();
      finish();
    };
    return {
      close() {
        closed = true;
        source.close();
      },
    };
  }
  const controller = new AbortController();
  (async () => {
    try {
      const response = await request(paths.stream(runId), {
        query: { afterSeq },
        signal: controller.signal,
        accept: "text/event-stream",
      });
      for await (const frame of frames(response.body, controller.signal)) {
        onEvent(Number(frame.id), frame.data);
      }
    } catch {
      // aborted, or the connection broke: either way the caller looks at the run again
    }
    if (!controller.signal.aborted) finish();
  })();
  return {
    close() {
      closed = true;
      controller.abort();
    },
  };
}
