// The reference client as the judge of generated streams (tests/interop/fuzz.py).
//
// stdin: a JSON list of cases {format, file, input}: `file` is the stream as the recorder's
// `fold`/`verify` read it (base64 of a JSON array, JSONL or an SSE capture), `input` the
// posted RunAgentInput as JSON text, or null. stdout: a JSON list with one
// {error, stage, outcome} per case:
//
// - error: the message the run failed with, null if it did not fail;
// - stage: where it failed: "input" (no HttpAgent could have posted that input), "read"
//   (the file is not a JSON array or a line is not JSON), "frame" (a frame is not an event),
//   "enforce", "chunks", "verify", or "apply" (the reducer, cloning the state);
// - outcome: {messages, state, pendingInterrupts} as JSON.stringify writes them, or null
//   when they cannot be written (a patch left them cyclic).
//
// A stream is read the way an HttpAgent reads it: an SSE capture through the client's own
// transformHttpEventStream; a JSON array or JSONL (which the client has no reader for) by
// JSON.parse, with the same checks on each frame. The run is the "headless oracle": an
// AbstractAgent whose run() replays the stream through the whole runAgent pipeline.
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";

const client = await import("@ag-ui/client");
const { AbstractAgent, AGUIError, enforceOutgoingInput, transformHttpEventStream } = client;
const { Observable, asapScheduler, scheduled } = await import("rxjs");

for (const level of ["log", "info", "warn", "error", "debug"]) console[level] = () => {};

class Replay extends AbstractAgent {
  constructor(config, events) {
    super(config);
    this.events = events;
  }

  run() {
    return this.events;
  }
}

class ReadError extends Error {}

function frameChecked(json) {
  // transformHttpEventStream's checks on each frame, for the readers that are not it.
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw new Error("Invalid event: the frame is not a JSON object.");
  }
  if (typeof json.type !== "string" || json.type.length === 0) {
    throw new Error("Invalid event: the frame carries no event type.");
  }
  return json;
}

function parsed(text) {
  try {
    return JSON.parse(text);
  } catch (caught) {
    throw new ReadError(caught.message);
  }
}

function stream(format, bytes) {
  if (format === "sse") {
    // The transform reads its source as soon as it is made, as it would a response that is
    // still arriving: the bytes come a tick later, once the run is listening.
    const http = scheduled(
      [
        { type: "headers", status: 200, headers: new Headers({ "content-type": "text/event-stream" }) },
        { type: "data", data: bytes },
      ],
      asapScheduler,
    );
    return new Observable((subscriber) => transformHttpEventStream(http).subscribe(subscriber));
  }
  return new Observable((subscriber) => {
    try {
      const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
      if (format === "array") {
        const frames = parsed(text);
        if (!Array.isArray(frames)) throw new ReadError("not a JSON array");
        for (const frame of frames) subscriber.next(frameChecked(frame));
      } else {
        // One frame a line, each read as the SSE reader reads a frame's data.
        for (const line of text.split("\n")) {
          if (line.trim()) subscriber.next(frameChecked(JSON.parse(line)));
        }
      }
      subscriber.complete();
    } catch (caught) {
      subscriber.error(caught);
    }
  });
}

function stageOf(caught) {
  const message = String(caught?.message ?? caught);
  if (caught instanceof ReadError) return "read";
  if (caught instanceof SyntaxError) return "frame";
  if (message.startsWith("Invalid event:")) return "frame";
  if (caught?.name === "ZodError") return "enforce";
  if (caught instanceof AGUIError) return "verify";
  if (/^(First \w+ must have|Cannot continue |Ambiguous )/.test(message)) return "chunks";
  return "apply";
}

function postable(input) {
  // What an HttpAgent posts is enforced first: an input it would refuse was never posted.
  enforceOutgoingInput({
    threadId: "thread",
    runId: "run",
    state: input.state ?? {},
    messages: input.messages ?? [],
    tools: [],
    context: [],
    forwardedProps: {},
  });
}

async function judge({ format, file, input }) {
  const bytes = new Uint8Array(Buffer.from(file, "base64"));
  if (format === "array") {
    // A file that is no JSON array is refused before anything else is looked at.
    try {
      const frames = parsed(new TextDecoder("utf-8", { fatal: false }).decode(bytes));
      if (!Array.isArray(frames)) throw new ReadError("not a JSON array");
    } catch (caught) {
      return { error: String(caught?.message ?? caught), stage: "read", outcome: null };
    }
  }
  let posted = {};
  if (input !== null) {
    try {
      posted = JSON.parse(input);
      postable(posted);
    } catch (caught) {
      return { error: String(caught?.message ?? caught), stage: "input", outcome: null };
    }
  }
  const agent = new Replay(
    { threadId: "thread", initialMessages: posted.messages ?? [], initialState: posted.state ?? {} },
    stream(format, bytes),
  );
  let error = null;
  let stage = null;
  try {
    await agent.runAgent({ runId: "run" });
  } catch (caught) {
    error = String(caught?.message ?? caught);
    stage = stageOf(caught);
  }
  let outcome = null;
  try {
    outcome = JSON.parse(
      JSON.stringify({
        messages: agent.messages,
        state: agent.state,
        pendingInterrupts: agent.pendingInterrupts ?? [],
      }),
    );
  } catch {
    outcome = null; // cyclic: no frontend can write it down either
  }
  return { error, stage, outcome };
}

// A patch can write into the built-ins themselves (a root copied from `/toString`, then
// `add /x`): in a page that lasts for the rest of its life, here it would leak into the next
// case. Every case starts from the built-ins as they were.
function builtins() {
  const seen = new Set();
  const queue = [Object, Array, String, Number, Boolean, Function];
  for (let i = 0; i < queue.length; i++) {
    const target = queue[i];
    if (seen.has(target)) continue;
    seen.add(target);
    for (const name of Object.getOwnPropertyNames(target)) {
      const d = Object.getOwnPropertyDescriptor(target, name);
      const value = d.value;
      if ((typeof value === "function" || (typeof value === "object" && value !== null)) && !seen.has(value)) {
        queue.push(value);
      }
    }
  }
  return [...seen].map((target) => [
    target,
    Object.isExtensible(target),
    new Map(Object.getOwnPropertyNames(target).map((n) => [n, Object.getOwnPropertyDescriptor(target, n)])),
  ]);
}

function restore(saved) {
  for (const [target, , properties] of saved) {
    for (const name of Object.getOwnPropertyNames(target)) {
      if (!properties.has(name)) delete target[name];
    }
    for (const [name, before] of properties) {
      const now = Object.getOwnPropertyDescriptor(target, name);
      if (now === undefined || now.value !== before.value) Object.defineProperty(target, name, before);
    }
  }
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const cases = JSON.parse(Buffer.concat(chunks).toString("utf8"));
// Warm up first, so that whatever the libraries set up lazily is part of the baseline.
const warmUp = Buffer.from('data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n').toString("base64");
await judge({ format: "sse", file: warmUp, input: null });
await judge({ format: "array", file: Buffer.from("[]").toString("base64"), input: "{}" });
const pristine = builtins();
const results = [];
for (const item of cases) {
  results.push(JSON.stringify(await judge(item)));
  restore(pristine);
}
process.stdout.write(`[${results.join(",")}]`);
