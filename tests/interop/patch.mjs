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

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
process.stdout.write(JSON.stringify(JSON.parse(Buffer.concat(chunks).toString("utf8")).map(judge)));
