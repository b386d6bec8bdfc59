// The members of the prototypes and constructors JSON values meet in Node, one line each, in
// the form of recorder/reference/jsprototypes.py's table (which was printed by this script).
const kinds = { object: Object, array: Array, string: String, number: Number, boolean: Boolean, function: Function };
const lines = [];
function entry(name, value) {
  if (typeof value === "function") return value.name === name ? `${name}:${value.length}` : `${name}:${value.length}:${value.name}`;
  if (typeof value === "number") return `${name}=${Number.isNaN(value) ? "NaN" : String(value)}`;
  if (typeof value === "string") return `${name}="${value}"`;
  return `${name}?${typeof value}`;
}
function own(target) {
  return Object.getOwnPropertyNames(target).sort().map((name) => {
    const d = Object.getOwnPropertyDescriptor(target, name);
    return d.get || d.set ? `${name}!` : entry(name, d.value);
  }).join(" ");
}
for (const [kind, ctor] of Object.entries(kinds)) {
  lines.push(`${kind}.prototype ${own(ctor.prototype)}`);
  lines.push(`${kind} ${own(ctor)}`);
}
console.log(lines.join("\n"));
