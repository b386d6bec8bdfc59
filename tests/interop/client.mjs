// The real @ag-ui/client HttpAgent as the frontend in end-to-end tests.
//
//   node client.mjs run URL     stdin: {messages, state, runId, forwardedProps?, resume?, threadId}
//   node client.mjs stream URL  stdin: {threadId}   (GET a recorded stream, fold it from empty)
//
// stdout: {error, messages, state, pendingInterrupts, events} where events are the events
// the agent's pipeline delivered (after its own checks), as the frontend saw them.
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
const { HttpAgent } = await import("@ag-ui/client");
for (const level of ["log", "info", "warn", "debug"]) console[level] = () => {};

class StreamReader extends HttpAgent {
  requestInit() {
    return { method: "GET", headers: { Accept: "text/event-stream", ...this.headers } };
  }
}

const [mode, url] = process.argv.slice(2);
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const input = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");

const Kind = mode === "stream" ? StreamReader : HttpAgent;
const agent = new Kind({
  url,
  threadId: input.threadId ?? "thread",
  initialMessages: input.messages ?? [],
  initialState: input.state ?? {},
  headers: input.headers ?? {},
});
const events = [];
let error = null;
try {
  await agent.runAgent(
    {
      runId: input.runId,
      forwardedProps: input.forwardedProps,
      resume: input.resume,
    },
    { onEvent: ({ event }) => { events.push(event); } },
  );
} catch (caught) {
  error = String(caught?.message ?? caught);
}
process.stdout.write(
  JSON.stringify({
    error,
    messages: agent.messages,
    state: agent.state,
    pendingInterrupts: agent.pendingInterrupts ?? [],
    events,
  }),
);
