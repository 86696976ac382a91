// A minimal conformance harness in TypeScript: the smallest thing that takes
// part in the suite (HARNESS.md). It implements `start`, `compile` and `call`
// for one tool, `read`, with line windows; `reset` and `close` are one-liners.
//
// The interesting part is `FEATURES`: by declaring only `tool.read`, it tells
// the runner it has no manifest compiler, no capability check, no rules, no
// envelope extensions and no compile description, so every case that needs
// those is reported as not applicable instead of failed, and checks of the
// SPEC's envelope extensions are not evaluated. Add features as you implement
// them. Build with `tsc -p harnesses/skeleton-ts --outDir <dir>` and run
// `agentcore conformance run --impl "command:node <dir>/harness.js"`.

import * as fs from "node:fs";
import * as path from "node:path";
import * as readline from "node:readline";

const FEATURES: string[] = ["tool.read"];

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Request = { seq: number; op: string; [key: string]: Json };
type Reply = { [key: string]: Json };
type Agent = { workspace: string | null; tools: string[] };

const agents = new Map<string, Agent>();

function envelopeError(text: string): Reply {
  return { envelope: { type: "error", error_text: text, metadata: { duration_ms: 0 } } };
}

function compile(req: Request): Reply {
  const manifest = req.manifest as { [key: string]: Json };
  const tools = Array.isArray(manifest.tools) ? manifest.tools.filter((t): t is string => typeof t === "string") : [];
  if (tools.some((t) => t !== "read")) return { skip: { reason: "this harness implements only read" } };
  agents.set(String(req.agent), { workspace: typeof req.workspace === "string" ? fs.realpathSync(req.workspace) : null, tools });
  return { result: {} }; // no `effective`/`tools`: the harness does not declare compile.describe
}

function positive(value: Json | undefined): boolean {
  return value === undefined || (typeof value === "number" && Number.isInteger(value) && value >= 1);
}

// SPEC ORDER-2: arguments nested more than 64 containers deep are refused, naming the limit.
function tooDeep(value: Json, limit = 64): boolean {
  const stack: Array<[Json, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop() as [Json, number];
    if (typeof item !== "object" || item === null) continue;
    if (depth > limit) return true;
    for (const child of Object.values(item)) stack.push([child, depth + 1]);
  }
  return false;
}

function read(agent: Agent, args: { [key: string]: Json }): Reply {
  if (tooDeep(args)) return envelopeError("invalid arguments: nested more than 64 levels deep");
  const lineWindow = "offset" in args || "limit" in args;
  const byteWindow = "byte_offset" in args || "byte_length" in args;
  const known = ["path", "offset", "limit", "byte_offset", "byte_length"];
  if (typeof args.path !== "string" || args.path === "" || Object.keys(args).some((k) => !known.includes(k))) return envelopeError("invalid arguments: /path");
  if (!positive(args.offset) || !positive(args.limit) || (lineWindow && byteWindow)) return envelopeError("invalid arguments: a line window (offset, limit) and a byte window cannot be combined");
  if (byteWindow) return { skip: { reason: "byte windows are not implemented" } };
  if (agent.workspace === null && !path.isAbsolute(args.path)) return envelopeError("there is no workspace");
  let file: string;
  try { file = fs.realpathSync(path.resolve(agent.workspace ?? "/", args.path)); } catch { return envelopeError("the file does not exist"); }
  const st = fs.lstatSync(file);
  if (st.isDirectory()) return envelopeError("the path is a directory");
  if (!st.isFile()) return envelopeError("the path is not a regular file");
  const bytes = fs.readFileSync(file);
  if (bytes.subarray(0, 8192).includes(0)) return envelopeError("the file is binary");
  let text: string;
  try { text = new TextDecoder("utf-8", { fatal: true }).decode(bytes); } catch { return envelopeError("the file is not valid UTF-8"); }
  const lines = text === "" ? [] : text.split(/(?<=\n)/);
  const first = typeof args.offset === "number" ? args.offset : 1;
  const count = typeof args.limit === "number" ? args.limit : 2000;
  const window = lines.slice(first - 1, first - 1 + count);
  const end = first - 1 + window.length;
  return {
    envelope: {
      type: "output",
      data: { path: file, content: window.join(""), start_line: first, end_line: end, total_lines: lines.length, next_offset: end < lines.length ? end + 1 : null },
      metadata: { duration_ms: 0 },
    },
  };
}

function call(req: Request): Reply {
  const agent = agents.get(String(req.agent));
  if (agent === undefined) return { error: { message: "call before compile" } };
  if (req.tool !== "read" || !agent.tools.includes("read")) return envelopeError("this tool is not enabled");
  return read(agent, (req.args ?? {}) as { [key: string]: Json });
}

function handle(req: Request): Reply {
  switch (req.op) {
    case "start":
      return { result: { protocol: 1, implementation: { name: "skeleton-ts", version: "0.1.0", language: "typescript", spec_version: "3" }, features: FEATURES } };
    case "reset":
      agents.clear();
      return { result: {} };
    case "compile":
      return compile(req);
    case "call":
      return call(req);
    case "close":
      return { result: {} };
    default:
      return { skip: { reason: `${req.op} is not implemented` } };
  }
}

readline.createInterface({ input: process.stdin, terminal: false }).on("line", (line: string) => {
  if (line.trim() === "") return;
  let req: Request;
  try { req = JSON.parse(line) as Request; } catch { process.stdout.write(JSON.stringify({ seq: null, error: { message: "not JSON" } }) + "\n"); return; }
  let reply: Reply;
  try { reply = handle(req); } catch (e) { reply = { error: { message: `internal error in ${req.op}: ${String(e)}` } }; }
  process.stdout.write(JSON.stringify({ seq: req.seq, ...reply }) + "\n");
});
