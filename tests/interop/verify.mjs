// The reference verifier as an outside judge: stdin is a JSON list of event sequences, stdout
// a JSON list with one {ok, error, index} per sequence. `index` is the position of the event
// the reference rejected (the number of events it let through first), null when it accepts.
//
// Only the `verifyEvents` operator runs, not the runAgent pipeline, so it sees exactly the
// events the Python Verifier sees. All sequences go through one process to keep the suite fast.
import { verifyEvents } from "@ag-ui/client";
import { from } from "rxjs";

function judge(events) {
  let passed = 0;
  let outcome = null;
  // from(array) and verifyEvents are synchronous, so the outcome is known on return.
  verifyEvents(false)(from(events)).subscribe({
    next: () => {
      passed += 1;
    },
    error: (error) => {
      outcome = { ok: false, error: String(error?.message ?? error), index: passed };
    },
    complete: () => {
      outcome = { ok: true, error: null, index: null };
    },
  });
  if (outcome === null) throw new Error("verifyEvents did not finish synchronously");
  return outcome;
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const sequences = JSON.parse(Buffer.concat(chunks).toString("utf8"));
process.stdout.write(JSON.stringify(sequences.map(judge)));
