// The reference client as an outside judge of projection: stdin is a JSON list of cases
// {messages, state, events}, stdout a JSON list with one {error, messages, state,
// pendingInterrupts} per case.
//
// The "headless oracle": an AbstractAgent whose run() replays the recorded events, so
// runAgent() takes them through the whole 1.0 pipeline (compatibility boundary, enforcement,
// chunk expansion, verification, the default reducer). `error` is the message the pipeline
// rejected the stream with (null when it accepted it); messages and state are what the
// agent holds afterwards either way, i.e. what was applied before the error. All cases go
// through one process to keep the suite fast.
//
// A case with `"everyPrefix": true` answers with a list instead: the fold of its first 0, 1,
// ..., n events (the state at every seq of a run, without sending the events n times).
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";

const { AbstractAgent } = await import("@ag-ui/client");
const { from } = await import("rxjs");

// The reducer reports warnings (unknown ids, failed patches) on the console; stdout must
// carry only the JSON answer.
for (const level of ["log", "info", "warn", "error", "debug"]) console[level] = () => {};

class Replay extends AbstractAgent {
  constructor(config, events) {
    super(config);
    this.events = events;
  }

  run() {
    return from(this.events);
  }
}

async function project({ messages = [], state = {}, events }) {
  const agent = new Replay({ threadId: "thread", initialMessages: messages, initialState: state }, events);
  let error = null;
  try {
    await agent.runAgent({ runId: "run" });
  } catch (caught) {
    error = String(caught?.message ?? caught);
  }
  return {
    error,
    messages: agent.messages,
    state: agent.state,
    pendingInterrupts: agent.pendingInterrupts,
  };
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const cases = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const results = [];
async function outcomeOf(item) {
  if (!item.everyPrefix) return project(item);
  const prefixes = [];
  for (let n = 0; n <= item.events.length; n += 1) {
    prefixes.push(await project({ ...item, events: item.events.slice(0, n) }));
  }
  return prefixes;
}

for (const item of cases) {
  const outcome = await outcomeOf(item);
  try {
    results.push(JSON.stringify(outcome));
  } catch (caught) {
    // A patch can leave the state circular (a move from the root into itself).
    results.push(JSON.stringify({ error: `unserializable outcome: ${caught.message}` }));
  }
}
process.stdout.write(`[${results.join(",")}]`);
