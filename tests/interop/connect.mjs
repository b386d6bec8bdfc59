// What README.md shows a TypeScript frontend for restoring a thread after a reload, run with
// the real @ag-ui/client: the lines between the README markers are the README's, types aside
// (tests/api/test_connect.py checks that they match).
//
//   node connect.mjs   stdin: {url, threadId}
//   stdout: {messages, state, pendingInterrupts}, what the agent holds after connectAgent()
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
for (const level of ["log", "info", "warn", "debug"]) console[level] = () => {};

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const { url, threadId } = JSON.parse(Buffer.concat(chunks).toString("utf8"));

// README: connect
import { HttpAgent } from "@ag-ui/client";

// connectAgent() calls connect(): the recorder answers with the thread's history, then its live run.
class RecordedAgent extends HttpAgent {
  connect(input) {
    return new HttpAgent({ url: `${this.url}/connect`, headers: this.headers }).run(input);
  }
}

const agent = new RecordedAgent({ url, threadId });
await agent.connectAgent(); // agent.messages, agent.state, agent.pendingInterrupts: back
// README: end

process.stdout.write(JSON.stringify({
  messages: agent.messages,
  state: agent.state,
  pendingInterrupts: agent.pendingInterrupts ?? [],
}));
