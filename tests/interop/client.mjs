// The real @ag-ui/client HttpAgent as the frontend in end-to-end tests.
//
//   node client.mjs run URL     stdin: {messages, state, runId, forwardedProps?, resume?, threadId}
//   node client.mjs stream URL  stdin: {threadId}   (GET a recorded stream, fold it from empty)
//
// stdout: {error, messages, state, pendingInterrupts, events} where events are the events
// the agent's pipeline delivered (after its own checks), as the frontend saw them.
//
//   node client.mjs conversation URL
//       stdin: {threadId, messages?, state?, turns: [{runId, user?, toolResult?, resume?,
//               tools?, forwardedProps?, parentRunId?}]}
//
// One HttpAgent runs every turn in order, as a frontend does: before a turn it answers
// every tool call still open with `toolResult` (frontend tools) and adds the user's message
// (`user`: text or content parts, id RUNID-user); `resume` answers every pending interrupt
// with that payload; `parentRunId` goes into the RunAgentInput. stdout: a list with one
// {runId, error, messages, state, pendingInterrupts, events} per turn.
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
const { HttpAgent } = await import("@ag-ui/client");
for (const level of ["log", "info", "warn", "debug"]) console[level] = () => {};

class StreamReader extends HttpAgent {
  requestInit() {
    return { method: "GET", headers: { Accept: "text/event-stream", ...this.headers } };
  }
}

// A frontend that names the run it continues (the stock client never sends parentRunId).
class LineageAgent extends HttpAgent {
  prepareRunAgentInput(parameters) {
    const input = super.prepareRunAgentInput(parameters);
    return parameters?.parentRunId ? { ...input, parentRunId: parameters.parentRunId } : input;
  }
}

function openToolCalls(messages) {
  const answered = new Set(messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
  return messages.flatMap((m) => (m.role === "assistant" ? m.toolCalls ?? [] : []))
    .filter((call) => !answered.has(call.id));
}

async function converse(url, input) {
  const agent = new LineageAgent({
    url,
    threadId: input.threadId,
    initialMessages: input.messages ?? [],
    initialState: input.state ?? {},
  });
  const turns = [];
  for (const turn of input.turns) {
    if (turn.toolResult !== undefined) {
      for (const call of openToolCalls(agent.messages)) {
        agent.addMessage({
          id: `${turn.runId}-${call.id}`, role: "tool", toolCallId: call.id, content: turn.toolResult,
        });
      }
    }
    if (turn.user !== undefined) {
      agent.addMessage({ id: `${turn.runId}-user`, role: "user", content: turn.user });
    }
    const resume = turn.resume === undefined ? undefined : agent.pendingInterrupts.map(
      (pending) => ({ interruptId: pending.id, status: "resolved", payload: turn.resume }),
    );
    const events = [];
    let error = null;
    try {
      await agent.runAgent(
        {
          runId: turn.runId,
          tools: turn.tools,
          forwardedProps: turn.forwardedProps,
          resume,
          parentRunId: turn.parentRunId,
        },
        { onEvent: ({ event }) => { events.push(event); } },
      );
    } catch (caught) {
      error = String(caught?.message ?? caught);
    }
    turns.push({
      runId: turn.runId,
      error,
      ...structuredClone({
        messages: agent.messages,
        state: agent.state,
        pendingInterrupts: agent.pendingInterrupts ?? [],
      }),
      events,
    });
  }
  return turns;
}

const [mode, url] = process.argv.slice(2);
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const input = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");

async function runOnce(mode, url, input) {
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
  return {
    error,
    messages: agent.messages,
    state: agent.state,
    pendingInterrupts: agent.pendingInterrupts ?? [],
    events,
  };
}

const answer = mode === "conversation" ? await converse(url, input) : await runOnce(mode, url, input);
process.stdout.write(JSON.stringify(answer));
