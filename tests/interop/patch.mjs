// fast-json-patch as the reference client calls it, as an outside judge of recorder's port:
// stdin is a JSON list of {document, patch}; stdout a JSON list with one outcome each:
// {document} when the patch applied and the result can be cloned and written down,
// {error: name} when applyPatch threw (fast-json-patch's error name, or the JavaScript
// error's), {unclonable: message} when the result holds a function, {cycle: true} when it
// holds a cycle, {undefined: true} when it left the document undefined.
import jsonpatch from "fast-json-patch";

function judge({ document, patch }) {
  let result;
  try {
    result = jsonpatch.applyPatch(document, patch, true, false).newDocument;
  } catch (caught) {
    return { error: caught?.name ?? String(caught) };
  }
  if (result === undefined) return { undefined: true };
  try {
    structuredClone(result);
  } catch (caught) {
    return { unclonable: String(caught?.message ?? caught) };
  }
  try {
    return { document: JSON.parse(JSON.stringify(result)) };
  } catch {
    return { cycle: true };
  }
}

// A patch whose root is a built-in function writes into it: every row starts from the
// built-ins as they were (one process judges them all).
function builtins() {
  const seen = new Set();
  const queue = [Object, Array, String, Number, Boolean, Function];
  for (let i = 0; i < queue.length; i++) {
    const target = queue[i];
    if (seen.has(target)) continue;
    seen.add(target);
    for (const name of Object.getOwnPropertyNames(target)) {
      const value = Object.getOwnPropertyDescriptor(target, name).value;
      if (value !== null && (typeof value === "function" || typeof value === "object")) queue.push(value);
    }
  }
  return [...seen].map((target) => [
    target,
    new Map(Object.getOwnPropertyNames(target).map((n) => [n, Object.getOwnPropertyDescriptor(target, n)])),
  ]);
}

function restore(saved) {
  for (const [target, properties] of saved) {
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
const pristine = builtins();
const outcomes = JSON.parse(Buffer.concat(chunks).toString("utf8")).map((row) => {
  const outcome = judge(row);
  restore(pristine);
  return outcome;
});
process.stdout.write(JSON.stringify(outcomes));
