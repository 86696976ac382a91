#!/usr/bin/env node
// A second, independent implementation of part of SPEC.md, speaking the
// conformance harness protocol (HARNESS.md) over stdin/stdout.
//
// Implemented: manifest compile (requires, variables, rules, limits), the
// rule engine of PERM-9/PERM-10 with PERM-13 numbering, the capability
// check for paths (CAP-5/6/8/9), headless and interactive ask resolution,
// session sidecar directories, truncation with sidecars, and the five file
// tools read, write, edit, glob and grep. Everything else is declared
// unsupported: calls are gated by features, and a manifest enabling other
// tools gets a `skip`. Node 20, no dependencies.
//
// grep uses JavaScript regular expressions (with the `u` flag) as a stand-in
// for Rust `regex` syntax: the common syntax agrees, and the suite's patterns
// stay within it.

import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";

const PROTOCOL = 1;
const LOCKED = ["read", "write", "edit", "glob", "grep", "bash", "todo", "task", "question", "web_search", "web_fetch", "skill", "tool_search"];
const SUPPORTED = new Set(["read", "write", "edit", "glob", "grep"]);
const FEATURES = [
  "tool.read", "tool.write", "tool.edit", "tool.glob", "tool.grep",
  "manifest", "capability", "rules", "envelope.extensions", "compile.describe",
  "interactive", "rules.project", "rules.session", "symlinks", "bindings", "limits",
];
const LIMIT_DEFAULTS = { read_bytes: 200 * 1024, glob_entries: 1000, grep_matches: 200, default_bytes: 200 * 1024, text_bytes: 8 * 1024 * 1024, sidecar_bytes: 64 * 1024 * 1024 };
const LONG_LINE = 2000;
const LONG_LINE_MARK = " [... omitted end of long line]";
const KINDS = { read: "read", write: "edit", edit: "edit", glob: "search", grep: "search", tool_search: "search", bash: "execute", web_search: "fetch", web_fetch: "fetch", skill: "think", todo: "other", task: "other", question: "other" };
const CAPS = new Set(["fs.read", "fs.write", "net.fetch", "shell.run"]);
const HEADLESS_TEXT = "Permission required but this run is headless; the call was not performed.";
const READ_LIMIT = 200 * 1024;
const TEXT_BOUND = 8 * 1024 * 1024;
const PROTECTED_NAMES = new Set([".aider.conf.yml", ".appveyor.yml", ".bash_login", ".bash_logout", ".bash_profile", ".bashrc", ".cirrus.yml", ".cshrc", ".devcontainer.json", ".dir-locals-2.el", ".dir-locals.el", ".drone.yml", ".envrc", ".exrc", ".gitattributes", ".gitconfig", ".gitlab-ci.yml", ".gitmodules", ".gitpod.yml", ".gvimrc", ".huskyrc", ".huskyrc.js", ".huskyrc.json", ".kshrc", ".lefthook-local.yml", ".lefthook.yaml", ".lefthook.yml", ".lfsconfig", ".lintstagedrc", ".lintstagedrc.cjs", ".lintstagedrc.js", ".lintstagedrc.json", ".lintstagedrc.mjs", ".lintstagedrc.yaml", ".lintstagedrc.yml", ".mcp.json", ".mise.local.toml", ".mise.toml", ".npmrc", ".nvim.lua", ".nvimrc", ".overcommit.yml", ".pnpmfile.cjs", ".pre-commit-config.yaml", ".profile", ".ripgreprc", ".tcshrc", ".travis.yml", ".vimrc", ".woodpecker.yml", ".yarnrc", ".yarnrc.yml", ".zlogin", ".zlogout", ".zprofile", ".zshenv", ".zshrc", "Jenkinsfile", "appveyor.yml", "azure-pipelines.yml", "bitbucket-pipelines.yml", "lefthook-local.yml", "lefthook.yaml", "lefthook.yml", "lint-staged.config.cjs", "lint-staged.config.js", "lint-staged.config.mjs", "mise.local.toml", "mise.toml", "opencode.json", "opencode.jsonc", "rust-toolchain", "rust-toolchain.toml", ".bazelrc", ".pdbrc", ".Rprofile", ".irbrc", ".pryrc", ".gdbinit", ".lldbinit", "sitecustomize.py", "usercustomize.py", ".crush.json", "crush.json", ".tool-versions", ".project", ".factorypath", ".classpath", "kilo.json", "kilo.jsonc", "uv.toml", "bunfig.toml", ".bunfig.toml", ".condarc", ".bash_aliases", ".inputrc", ".tmux.conf", ".screenrc", ".xinitrc", ".xprofile", ".xsession", ".xsessionrc", ".emacs"]);
// Python runs the `import` lines of every `.pth` file directly in these directories at each start.
const SITE_DIRS = new Set(["site-packages", "dist-packages"]);
const WATCHDOG_CATEGORIES = new Set(["exfiltration", "destructive", "code_execution_wrapper", "secrets", "network_shell"]);
const PROTECTED_DIRS = new Set([".agentcore", ".amazonq", ".azure-pipelines", ".buildkite", ".circleci", ".claude", ".codex", ".continue", ".cursor", ".devcontainer", ".direnv", ".fleet", ".forgejo", ".gemini", ".git", ".gitea", ".githooks", ".github", ".gitlab", ".husky", ".idea", ".kiro", ".lefthook", ".mise", ".opencode", ".roo", ".semaphore", ".ssh", ".theia", ".vscode", ".windsurf", ".woodpecker", ".zed", ".cargo", ".mvn", ".hg", ".jj", ".qwen", ".openhands", ".helix", ".idx", ".nvm", ".sdkman", ".pyenv", ".rbenv", ".nodenv", ".asdf", ".volta", ".rustup", ".aws", ".kube", ".gnupg", ".externalToolBuilders", ".settings", ".clinerules", ".kilocode", ".kilo", ".pip", ".vim", ".emacs.d", ".ipython", ".jupyter"]);
// SPEC ENV-7 / Table 5 (rule 4, what git configuration names, is not implemented here).
const PROTECTED_SEQUENCES = [[".config", "git"], [".config", "systemd"], [".config", "autostart"], [".config", "environment.d"], [".config", "direnv"], [".config", "fish"], [".config", "mise"], [".config", "Code", "User"], [".local", "bin"], [".docker", "config.json"], [".docker", "cli-plugins"], [".gradle", "init.d"], [".gradle", "gradle.properties"], [".bun", "bin"], [".deno", "bin"], [".config", "pip"], [".config", "uv"], [".config", "conda"], [".m2", "settings.xml"], [".config", "nvim"], [".config", "emacs"], [".config", "tmux"], [".config", "mise.toml"], [".config", "mise.local.toml"], ["mise", "config.toml"], ["mise", "config.local.toml"], ["bin", "activate"], ["bin", "activate.csh"], ["bin", "activate.fish"], ["bin", "activate.nu"], ["bin", "Activate.ps1"], ["bin", "activate_this.py"]];
const LAYOUT_MARKERS = ["HEAD", "objects", "refs", "commondir", "pyvenv.cfg", "conda-meta"];

class CompileError extends Error {}
class Refusal extends Error {
  constructor(layer, code, message, extra = {}) { super(message); this.layer = layer; this.code = code; this.extra = extra; }
}
class ToolError extends Error {
  constructor(code, message) { super(message); this.code = code; }
}

// ---------------------------------------------------------------- patterns (REQ-3..7)

function isWild(ch) { return ch === "*" || ch === "?" || ch === "["; }

function escapeGlob(text) { return text.replace(/[\\*?[\]{}]/g, (c) => "\\" + c); }

// One component of a path pattern -> regex source; returns [source, literalCount, hasWildcard].
function componentRegex(comp) {
  if (comp === "**") return [null, 0, true];
  let out = "", literal = 0, wild = false;
  for (let i = 0; i < comp.length; i++) {
    const c = comp[i];
    if (c === "\\" && i + 1 < comp.length) { out += escapeRe(comp[++i]); literal++; }
    else if (c === "*") { wild = true; while (comp[i + 1] === "*") i++; out += "[^/]*"; }
    else if (c === "?") { wild = true; out += "[^/]"; }
    else if (c === "[") {
      const end = comp.indexOf("]", i + 2);
      if (end < 0) { out += "\\["; literal++; continue; }
      let body = comp.slice(i + 1, end);
      let neg = false;
      if (body[0] === "!" || body[0] === "^") { neg = true; body = body.slice(1); }
      body = body.replace(/\\/g, "\\\\").replace(/]/g, "\\]");
      out += neg ? `[^/${body}]` : `[${body}]`;
      wild = true;
      i = end;
    } else { out += escapeRe(c); literal++; }
  }
  return [out, literal, wild];
}

function escapeRe(c) { return c.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&"); }

// Runs of two or more unescaped `*`: each multiplies the cost of matching one value by its depth (REQ-6, FILE-12).
function globstarRuns(pattern) {
  let runs = 0;
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] === "\\") { i++; continue; }
    if (pattern[i] === "*" && pattern[i + 1] === "*") { runs++; while (pattern[i + 1] === "*") i++; }
  }
  return runs;
}
function danglingEscape(pattern) { return ((pattern.length - pattern.replace(/\\+$/, "").length) % 2) === 1; }

// An absolute path pattern compiled for matching canonical paths.
function compilePathPattern(text) {
  if (!text.startsWith("/")) throw new CompileError(`path pattern is not absolute: ${text}`);
  if (danglingEscape(text)) throw new CompileError("a path pattern may not end in a backslash that escapes nothing");
  if (globstarRuns(text) > 3) throw new CompileError("a path pattern may hold at most three ** runs");
  const comps = text.split("/").filter((c) => c !== "");
  let src = "", literal = comps.length, wild = false;
  for (const c of comps) {
    if (c === "." || c === "..") throw new CompileError("a path pattern may not contain . or .. components");
    const [re, lit, w] = componentRegex(c);
    wild = wild || w;
    if (re === null) src += "(?:/[^/]+)*";
    else { src += "/" + re; literal += lit; }
  }
  if (src === "") src = "/";
  return { text: "/" + comps.join("/"), re: new RegExp("^" + src + "$", "u"), literal, exact: !wild };
}

// -------------------------------------------------------------------- variables (VAR)

const VAR_RE = /(?<!\\)\{([^{}]*)\}/g;

function expand(pattern, bindings, where) {
  const names = [...pattern.matchAll(VAR_RE)].map((m) => m[1]);
  for (const n of names) if (!["workspace", "ad-hoc", "user-data"].includes(n)) throw new CompileError(`unknown variable {${n}} in ${where}`);
  if (names.length === 0) return [pattern];
  let results = [pattern];
  for (const n of names) {
    const vals = bindings[n] || [];
    if (vals.length === 0) return [];
    const next = [];
    for (const r of results) for (const v of vals) next.push(r.replace(`{${n}}`, escapeGlob(v)));
    results = next;
  }
  return results;
}

function anchorPattern(text, workspace, where) {
  let t = text;
  if (!t.startsWith("/")) {
    if (!workspace) throw new CompileError(`relative pattern without a workspace in ${where}`);
    t = workspace + "/" + t;
  }
  return compilePathPattern(t);
}

// ------------------------------------------------------------------------- manifest

const MANIFEST_KEYS = new Set(["name", "description", "tools", "requires", "rules", "limits", "roots", "environment", "watchdog", "agents", "skills", "web_search"]);
const REQ_KEYS = new Set(["fs", "net", "shell", "capabilities"]);

function checkStrings(list, where) {
  if (list === undefined) return [];
  if (!Array.isArray(list) || !list.every((x) => typeof x === "string")) throw new CompileError(`${where} must be a list of strings`);
  return list;
}

// `offset` numbers rules after those already in the scope (the session scope grows, PERM-13);
// a rule keeps one index however many patterns its variables expand to.
function compileRules(rules, scope, bindings, workspace, knownCaps, offset = 0) {
  const out = [];
  (rules || []).forEach((r, position) => {
    const index = offset + position;
    if (typeof r !== "object" || r === null || typeof r.permission !== "string" || typeof r.pattern !== "string" || !["allow", "deny", "ask"].includes(r.action)) throw new CompileError(`${scope} rule #${index + 1} needs permission, pattern and action allow|deny|ask`);
    const p = r.permission;
    if (p !== "*" && !knownCaps.has(p) && !CAPS.has(p) && !LOCKED.includes(p)) throw new CompileError(`rule permission ${p} is not a tool, a capability or *`);
    const rank = p === "*" ? 0 : p.includes(".") ? 1 : 2;
    if (globstarRuns(r.pattern) > 3) throw new CompileError(`${scope} rule #${index + 1}: a pattern may hold at most three ** runs`);
    for (const text of expand(r.pattern, bindings, `${scope} rule #${index + 1}`)) {
      let path = null;
      if (text !== "*") {
        try { path = anchorPattern(text, workspace, "rule"); }
        catch (e) { if ((p === "fs.read" || p === "fs.write") && e instanceof CompileError) throw e; path = null; }
      }
      out.push({ scope, index, permission: p, action: r.action, star: text === "*", path });
    }
  });
  return out;
}

function compileManifest(m, workspace, bindings) {
  if (typeof m !== "object" || m === null) throw new CompileError("manifest must be an object");
  for (const k of Object.keys(m)) if (!MANIFEST_KEYS.has(k)) throw new CompileError(`unknown manifest key ${k}`);
  if (typeof m.name !== "string" || !m.name) throw new CompileError("manifest needs a name");
  const tools = checkStrings(m.tools, "tools");
  for (const t of tools) if (!LOCKED.includes(t)) throw new CompileError(`unknown tool ${t}`);
  if (new Set(tools).size !== tools.length) throw new CompileError("a tool is listed twice");
  const req = m.requires || {};
  if (typeof req !== "object") throw new CompileError("requires must be an object");
  for (const k of Object.keys(req)) if (!REQ_KEYS.has(k)) throw new CompileError(`unknown requires key ${k}`);
  const fsReq = req.fs || {};
  for (const k of Object.keys(fsReq)) if (k !== "read" && k !== "write") throw new CompileError(`unknown requires.fs key ${k}`);
  const net = req.net || {};
  for (const k of Object.keys(net)) if (k !== "hosts") throw new CompileError(`unknown requires.net key ${k}`);
  const hosts = checkStrings(net.hosts, "requires.net.hosts");
  for (const h of hosts) if (h === "*" || /[{}\/@]/.test(h) || h.includes("://")) throw new CompileError("invalid host pattern");
  const wd = m.watchdog || {};
  if (typeof wd !== "object" || Object.keys(wd).some((k) => k !== "enabled" && k !== "disable")) throw new CompileError("watchdog takes enabled and disable");
  for (const c of checkStrings(wd.disable, "watchdog.disable")) if (!WATCHDOG_CATEGORIES.has(c)) throw new CompileError(`unknown watchdog category ${c}`);
  const caps = checkStrings(req.capabilities, "requires.capabilities");
  for (const c of caps) if (!/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/.test(c)) throw new CompileError(`invalid capability name ${c}`);
  const paths = (key) => {
    const out = [];
    for (const raw of checkStrings(fsReq[key], `requires.fs.${key}`)) for (const t of expand(raw, bindings, `requires.fs.${key}`)) out.push(anchorPattern(t, workspace, `requires.fs.${key}`));
    return out;
  };
  const fsRead = paths("read"), fsWrite = paths("write");
  const knownCaps = new Set(caps);
  const rules = compileRules(m.rules, "manifest", bindings, workspace, knownCaps);
  const limits = m.limits || {};
  if (typeof limits !== "object" || Array.isArray(limits)) throw new CompileError("limits must be an object");
  for (const [k, v] of Object.entries(limits)) if (!Number.isInteger(v) || v < 1) throw new CompileError(`limits.${k} must be a positive integer`);
  const agentFiles = subagentFiles(m.agents);
  return { tools, fsRead, fsWrite, hosts, caps, rules, knownCaps, agentFiles, limits: { ...LIMIT_DEFAULTS, ...limits } };
}

function realOrResolved(p) {
  try { return fs.realpathSync(p); } catch { return path.resolve(p); }
}

// ENV-7 rule 5: every subagent manifest reachable through `agents` (nested maps followed; this harness
// reads JSON only, and a file it cannot parse is protected all the same). Relative top-level entries are
// taken against the harness's working directory: it is handed a manifest object, not a file.
function subagentFiles(agents) {
  if (agents === undefined) return new Set();
  if (typeof agents !== "object" || agents === null || Array.isArray(agents)) throw new CompileError("agents must be a map of names to manifest paths");
  const seen = new Set();
  const todo = Object.values(agents).map((rel) => {
    if (typeof rel !== "string" || !rel) throw new CompileError("an agents entry must be a manifest path");
    return path.resolve(rel);
  });
  while (todo.length) {
    const file = realOrResolved(todo.pop());
    if (seen.has(file)) continue;
    if (seen.size === 256) throw new CompileError("more than 256 subagent manifests are reachable through `agents`");
    seen.add(file);
    let data;
    try { data = JSON.parse(fs.readFileSync(file, "utf8")); } catch { continue; }
    const nested = data && typeof data === "object" ? data.agents : undefined;
    if (nested && typeof nested === "object" && !Array.isArray(nested)) {
      for (const rel of Object.values(nested)) if (typeof rel === "string") todo.push(path.resolve(path.dirname(file), rel));
    }
  }
  return seen;
}

// --------------------------------------------------------------------- rules (PERM)

const RANK = { allow: 0, ask: 1, deny: 2 };

function ruleMatches(rule, subject) {
  if (rule.permission !== "*" && rule.permission !== subject.tool && rule.permission !== subject.capability) return null;
  if (rule.star) return [0, 0, rule.permission === "*" ? 0 : rule.permission.includes(".") ? 1 : 2];
  if (subject.value === "" || subject.kind !== "path" || rule.path === null) return null;
  if (!rule.path.re.test(subject.value)) return null;
  return [rule.path.exact ? 1 : 0, rule.path.literal, rule.permission === "*" ? 0 : rule.permission.includes(".") ? 1 : 2];
}

function cmpSpec(a, b) { for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] - b[i]; return 0; }

function decide(rules, subject) {
  const applicable = [];
  for (const r of rules) {
    const spec = ruleMatches(r, subject);
    if (spec) applicable.push([spec, r]);
  }
  const pinned = applicable.find(([, r]) => r.scope === "manifest" && r.action === "deny");
  if (pinned) return { action: "deny", rule: pinned[1] };
  if (applicable.length === 0) return { action: "ask", rule: null };
  let best = applicable[0][0];
  for (const [s] of applicable) if (cmpSpec(s, best) > 0) best = s;
  const tied = applicable.filter(([s]) => cmpSpec(s, best) === 0).map(([, r]) => r);
  const action = tied.reduce((a, r) => (RANK[r.action] > RANK[a] ? r.action : a), "allow");
  const order = { manifest: 0, project: 1, session: 2 };
  const rule = tied.filter((r) => r.action === action).sort((a, b) => order[a.scope] - order[b.scope] || a.index - b.index)[0];
  return { action, rule };
}

// ------------------------------------------------------------------ paths (CAP-5..8)

function canonicalize(raw, workspace) {
  if (raw === "" || raw.includes("\0")) throw new Refusal("capability", "bad_path", "the path is empty or contains NUL");
  let p = raw;
  if (p.startsWith("~/")) p = os.homedir() + p.slice(1);
  if (!p.startsWith("/")) {
    if (!workspace) throw new Refusal("capability", "no_workspace", "there is no workspace, so no path can be resolved");
    p = workspace + "/" + p;
  }
  const parts = p.split("/");
  let cur = "/";
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i];
    if (part === "" || part === ".") continue;
    if (part === "..") { cur = path.dirname(cur); continue; }
    const cand = path.join(cur, part);
    let st;
    try { st = fs.lstatSync(cand); }
    catch (e) {
      if (e.code !== "ENOENT") throw new Refusal("capability", "unresolvable", "a path component cannot be read");
      const rest = parts.slice(i).filter((x) => x !== "" && x !== ".");
      if (rest.includes("..")) throw new Refusal("capability", "unresolvable", "'..' below a missing directory");
      return path.join(cur, ...rest);
    }
    if (st.isSymbolicLink()) {
      try { cur = fs.realpathSync(cand); }
      catch { throw new Refusal("capability", "unresolvable", "a symlink is dangling or loops"); }
    } else cur = cand;
  }
  return cur;
}

// A git directory layout, or a Python or conda environment (an editor starts its interpreter unasked).
function isLayout(names) {
  const git = names.has("HEAD") && (names.has("commondir") || (names.has("objects") && names.has("refs")));
  return git || names.has("pyvenv.cfg") || names.has("conda-meta");
}

function layoutMarkers(dir) {
  const out = new Set();
  for (const m of LAYOUT_MARKERS) {
    try { fs.lstatSync(path.join(dir, m)); out.add(m); } catch { /* absent */ }
  }
  return out;
}

function isProtected(p) {
  const parts = p.split("/").filter(Boolean);
  for (let i = 0; i < parts.length; i++) {
    if (PROTECTED_NAMES.has(parts[i]) || PROTECTED_DIRS.has(parts[i])) return true;
    if (i > 0 && parts[i].endsWith(".pth") && SITE_DIRS.has(parts[i - 1])) return true;
    if (parts[i].endsWith(".code-workspace") || parts[i].endsWith(".sublime-project")) return true;
    for (const seq of PROTECTED_SEQUENCES) {
      if (i + 1 >= seq.length && seq.every((c, k) => parts[i + 1 - seq.length + k] === c)) return true;
    }
  }
  // A layout (git directory, Python or conda environment), or the marker that would complete one (either order of creation).
  let cur = "/";
  for (const child of parts) {
    const have = layoutMarkers(cur);
    if (isLayout(have)) return true;
    if (LAYOUT_MARKERS.includes(child)) {
      have.add(child);
      if (isLayout(have)) return true;
    }
    cur = path.join(cur, child);
  }
  return false;
}

function within(child, root) { return child === root || child.startsWith(root.endsWith("/") ? root : root + "/"); }

// ------------------------------------------------------------------- tool schemas

const SCHEMAS = {
  read: { required: ["path"], props: { path: ["string", 1], offset: ["integer", 1], limit: ["integer", 1], byte_offset: ["integer", 0], byte_length: ["integer", 1] } },
  write: { required: ["path", "content"], props: { path: ["string", 1], content: ["string", 0] } },
  edit: { required: ["path", "old_string", "new_string"], props: { path: ["string", 1], old_string: ["string", 1], new_string: ["string", 0], replace_all: ["boolean", 0] } },
  glob: { required: ["pattern"], props: { pattern: ["string", 1], path: ["string", 1] } },
  grep: { required: ["pattern"], props: { pattern: ["string", 1], path: ["string", 1], glob: ["string", 1], case_insensitive: ["boolean", 0] } },
};

// Containers nested deeper than this are refused before anything else looks at the arguments (SPEC ORDER-2).
const MAX_DEPTH = 64;

function tooDeep(value) {
  const stack = [[value, 1]];
  while (stack.length) {
    const [item, depth] = stack.pop();
    if (typeof item !== "object" || item === null) continue;
    if (depth > MAX_DEPTH) return true;
    for (const child of Object.values(item)) stack.push([child, depth + 1]);
  }
  return false;
}
// A relative pattern that starts with `/` or climbs with `..` (glob's pattern, grep's glob filter).
function climbs(pattern) { return pattern.startsWith("/") || pattern.split("/").includes(".."); }

function validate(tool, args) {
  if (typeof args !== "object" || args === null || Array.isArray(args)) return "/: type (must be an object)";
  if (tooDeep(args)) return `/: nested more than ${MAX_DEPTH} levels deep`;
  const s = SCHEMAS[tool];
  for (const k of s.required) if (!(k in args)) return `/${k}: required`;
  for (const [k, v] of Object.entries(args)) {
    const spec = s.props[k];
    // ORDER-2: an unexpected property's name is not repeated; the allowed names are listed instead.
    if (!spec) return `/: additionalProperties (allowed: ${Object.keys(s.props).join(", ")})`;
    const [type, min] = spec;
    if (type === "string" && typeof v !== "string") return `/${k}: type`;
    if (type === "boolean" && typeof v !== "boolean") return `/${k}: type`;
    if (type === "integer" && !Number.isInteger(v)) return `/${k}: type`;
    if (type === "string" && v.length < min) return `/${k}: minLength`;
    if (type === "integer" && v < min) return `/${k}: minimum`;
  }
  if (tool === "read" && ("offset" in args || "limit" in args) && ("byte_offset" in args || "byte_length" in args)) return "/: a line window and a byte window cannot be combined (not)";
  if (tool === "glob" && (climbs(args.pattern) || globstarRuns(args.pattern) > 2)) return "/pattern: pattern";
  if (tool === "grep" && "glob" in args && (climbs(args.glob) || globstarRuns(args.glob) > 2)) return "/glob: pattern";
  return null;
}

// ------------------------------------------------------------------------- tools

function decodeText(buf) {
  try { return new TextDecoder("utf-8", { fatal: true }).decode(buf); }
  catch { throw new ToolError("binary", "the file is not valid UTF-8 text"); }
}

function openFile(p) {
  let st;
  try { st = fs.lstatSync(p); } catch { throw new ToolError("not_found", "the file does not exist"); }
  if (st.isDirectory()) throw new ToolError("is_directory", "the path is a directory");
  if (!st.isFile()) throw new ToolError("not_regular", "the path is not a regular file");
  return st;
}

// Largest end <= limit that does not cut a UTF-8 sequence.
function charBoundary(buf, end) {
  let e = Math.min(end, buf.length);
  while (e > 0 && e < buf.length && (buf[e] & 0xc0) === 0x80) e--;
  return e;
}

function toolRead(args, p, limits) {
  const st = openFile(p);
  const limit = limits.read_bytes || READ_LIMIT;
  const bound = limits.text_bytes || TEXT_BOUND;
  const windowed = ["offset", "limit", "byte_offset", "byte_length"].some((k) => k in args);
  if (st.size > bound && !windowed) throw new Refusal("limit", "too_large", "the file is larger than the text-size bound; read a window");
  const buf = fs.readFileSync(p);
  if (buf.subarray(0, 8192).includes(0)) throw new ToolError("binary", "the file contains NUL bytes");
  if ("byte_offset" in args || "byte_length" in args) {
    let start = args.byte_offset || 0;
    const want = Math.min(args.byte_length || limit, limit);
    if (start >= buf.length) return { data: { path: p, content: "", byte_offset: buf.length, byte_length: 0, total_bytes: buf.length, next_offset: null } };
    // Narrow the requested window [start, start + want) to character boundaries (FILE-4).
    const end = charBoundary(buf, start + want);
    while (start < end && (buf[start] & 0xc0) === 0x80) start++;
    if (end <= start) throw new Refusal("schema", "invalid_arguments", "invalid arguments: /byte_length: the window is too short to hold one character");
    const cut = (args.byte_length || limit) > limit && end < buf.length;
    return { data: { path: p, content: decodeText(buf.subarray(start, end)), byte_offset: start, byte_length: end - start, total_bytes: buf.length, next_offset: end < buf.length ? end : null }, truncated: cut };
  }
  const text = decodeText(buf);
  const lines = text.length ? text.split(/(?<=\n)/) : [];
  const first = args.offset || 1, count = args.limit || 2000;
  let content = "", used = 0, last = first - 1, cut = false;
  for (let n = first; n < first + count && n <= lines.length; n++) {
    const line = lines[n - 1];
    const size = Buffer.byteLength(line);
    if (used + size > limit) {
      cut = true;
      if (n === first) { const b = Buffer.from(line); content = b.subarray(0, charBoundary(b, limit)).toString(); last = n; }
      break;
    }
    content += line; used += size; last = n;
  }
  const next = last < lines.length && lines.length > 0 && first <= lines.length ? last + 1 : null;
  return { data: { path: p, content, start_line: first, end_line: last, total_lines: lines.length, next_offset: next }, truncated: cut };
}

function toolWrite(args, p, agent) {
  const data = Buffer.from(args.content, "utf-8");
  if (data.length > (agent.m.limits.text_bytes || TEXT_BOUND)) throw new Refusal("limit", "too_large", "content is larger than the text-size bound");
  let mode = null, created = true;
  try {
    const st = fs.lstatSync(p);
    if (st.isDirectory()) throw new ToolError("is_directory", "the path is a directory");
    if (!st.isFile()) throw new ToolError("not_regular", "the path is not a regular file");
    mode = st.mode & 0o7777; created = false;
  } catch (e) { if (e instanceof ToolError) throw e; }
  const missing = [];
  for (let d = path.dirname(p); !fs.existsSync(d); d = path.dirname(d)) missing.unshift(d);
  for (const d of missing) if (!agent.m.fsWrite.some((pat) => pat.re.test(d)) || isProtected(d)) throw new Refusal("capability", "out_of_scope", "a missing parent directory is outside fs.write");
  for (const d of missing) fs.mkdirSync(d);
  atomicWrite(p, data, mode);
  return { data: { path: p, bytes_written: data.length, created } };
}

function toolGlob(args, root, agent, session) {
  let st;
  try { st = fs.lstatSync(root); } catch { throw new ToolError("not_a_directory", "the search root does not exist"); }
  if (!st.isDirectory()) throw new ToolError("not_a_directory", "path is not a directory");
  const pat = compilePathPattern("/" + args.pattern);
  let found = [];
  let withheld = 0;
  const walk = (dir, rel) => {
    for (const ent of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, ent.name), r = rel ? rel + "/" + ent.name : ent.name;
      if (ent.isDirectory()) { if (ent.name !== ".git") walk(full, r); }
      else if (ent.isFile() && !ent.name.includes("\n") && pat.re.test("/" + r)) {
        const v = visible("glob", full, agent, session);
        if (v === "shown") found.push(full);
        else if (v === "withheld") withheld++;
      }
    }
  };
  walk(root, "");
  found.sort(byteOrder);
  const extra = withheld ? { withheld } : {};
  const limit = agent.m.limits.glob_entries;
  if (found.length <= limit) return { data: { paths: found, total: found.length }, ...extra };
  // TRUNC-3/4/9: the head is the first entries, the sidecar one path per line, up to the sidecar cap.
  const side = capLines(found.map((p) => p + "\n"), agent.m.limits.sidecar_bytes);
  found = found.slice(0, side.kept);
  const head = found.slice(0, limit);
  const sidecar = writeSidecar(session, "glob", side.text);
  return { data: { paths: head, total: found.length, head: head.join("\n") }, truncated: true, output_path: sidecar, capped: side.capped, ...extra };
}

// TRUNC-9: a sidecar holds whole lines up to the cap; what does not fit is not searched further.
function capLines(lines, cap) {
  let bytes = 0, kept = 0;
  for (const l of lines) {
    const n = Buffer.byteLength(l);
    if (bytes + n > cap) break;
    bytes += n; kept++;
  }
  return { text: lines.slice(0, kept).join(""), kept, capped: kept < lines.length };
}

function byteOrder(a, b) { return Buffer.compare(Buffer.from(a), Buffer.from(b)); }

// FILE-13 and PERM-14: a search shows a file only inside fs.read ("out" otherwise), and only when neither
// the searching tool's nor read's decision is deny, or ask because a rule said so ("withheld", counted).
function visible(tool, full, agent, session) {
  if (!agent.m.fsRead.some((p) => p.re.test(full))) return "out";
  const rules = rulesOf(agent, session);
  const hides = (d) => d.action === "deny" || (d.action === "ask" && d.rule !== null);
  const hidden = hides(decide(rules, { tool, capability: "fs.read", kind: "path", value: full }))
    || hides(decide(rules, { tool: "read", capability: "fs.read", kind: "path", value: full }));
  return hidden ? "withheld" : "shown";
}

// TRUNC-6: sidecars live in the session's private directory, mode 0600, unique names.
function writeSidecar(session, tool, text) {
  const name = `${tool}-output-${crypto.randomBytes(6).toString("hex")}.txt`;
  const file = path.join(session.workdir, name);
  fs.writeFileSync(file, text, { mode: 0o600, flag: "wx" });
  return file;
}

function atomicWrite(p, data, mode) {
  const tmp = path.join(path.dirname(p), `.${path.basename(p)}.${process.pid}.${Date.now()}.tmp`);
  const fd = fs.openSync(tmp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, mode === null ? 0o666 : 0o600);
  try { fs.writeSync(fd, data); fs.fsyncSync(fd); } finally { fs.closeSync(fd); }
  if (mode !== null) fs.chmodSync(tmp, mode);
  fs.renameSync(tmp, p);
}

function toolEdit(args, p, agent) {
  // FILE-9: old_string equal to new_string is no_change before anything else.
  if (args.old_string === args.new_string) throw new ToolError("no_change", "old_string and new_string are the same");
  const st = openFile(p);
  const bound = agent.m.limits.text_bytes;
  if (st.size > bound) throw new Refusal("limit", "too_large", "the file is larger than the text-size bound");
  const buf = fs.readFileSync(p);
  if (buf.subarray(0, 8192).includes(0)) throw new ToolError("binary", "the file contains NUL bytes");
  const text = decodeText(buf);
  // Non-overlapping occurrences, left to right.
  const parts = text.split(args.old_string);
  const count = parts.length - 1;
  if (count === 0) throw new ToolError("no_match", "old_string does not occur in the file");
  if (count > 1 && !args.replace_all) throw new ToolError("ambiguous", "old_string occurs more than once; give more context or set replace_all");
  let result;
  if (args.replace_all) result = parts.join(args.new_string);
  else { const at = text.indexOf(args.old_string); result = text.slice(0, at) + args.new_string + text.slice(at + args.old_string.length); }
  const data = Buffer.from(result, "utf-8");
  if (data.length > bound) throw new Refusal("limit", "too_large", "the result would be larger than the text-size bound");
  atomicWrite(p, data, st.mode & 0o7777);
  return { data: { path: p, replacements: args.replace_all ? count : 1 } };
}

function compileGrepFilter(filter) {
  if (filter === undefined) return null;
  const pat = compilePathPattern("/" + filter);
  return filter.includes("/") ? (rel) => pat.re.test("/" + rel) : (rel) => pat.re.test("/" + rel.split("/").pop());
}

function grepFile(full, rx, out) {
  let buf;
  try { buf = fs.readFileSync(full); } catch { return; }
  if (buf.subarray(0, 65536).includes(0)) return; // binary: ripgrep skips it (FILE-14)
  const decoder = new TextDecoder("utf-8");
  const lines = buf.length ? buf.toString("binary").split("\n") : [];
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  lines.forEach((latin, i) => {
    const raw = Buffer.from(latin, "binary");
    const text = decoder.decode(raw);
    if (!rx.test(text)) return;
    const shown = raw.length > LONG_LINE ? decoder.decode(raw.subarray(0, LONG_LINE)) + LONG_LINE_MARK : text;
    out.push({ path: full, line: i + 1, text: shown });
  });
}

function toolGrep(args, root, agent, session) {
  let rx;
  try { rx = new RegExp(args.pattern, args.case_insensitive ? "iu" : "u"); }
  catch { throw new ToolError("invalid_pattern", "the pattern is not a valid regular expression"); }
  let st;
  try { st = fs.lstatSync(root); } catch { throw new ToolError("not_found", "the search root does not exist"); }
  const filter = compileGrepFilter(args.glob);
  let found = [];
  let withheld = 0;
  const consider = (full, rel) => {
    if (filter && !filter(rel)) return;
    const v = visible("grep", full, agent, session);
    if (v === "withheld") withheld++;
    if (v !== "shown") return;
    grepFile(full, rx, found);
  };
  if (st.isFile()) consider(root, path.basename(root));
  else if (st.isDirectory()) {
    const walk = (dir, rel) => {
      for (const ent of fs.readdirSync(dir, { withFileTypes: true })) {
        const full = path.join(dir, ent.name), r = rel ? rel + "/" + ent.name : ent.name;
        if (ent.name.includes("\n")) continue;
        if (ent.isDirectory()) { if (ent.name !== ".git") walk(full, r); }
        else if (ent.isFile()) consider(full, r);
      }
    };
    walk(root, "");
  } else throw new ToolError("not_regular", "the search root is not a directory or a regular file");
  found.sort((a, b) => byteOrder(a.path, b.path) || a.line - b.line);
  const extra = withheld ? { withheld } : {};
  const limit = agent.m.limits.grep_matches;
  if (found.length <= limit) return { data: { matches: found, total: found.length }, ...extra };
  const line = (m) => `${m.path}:${m.line}:${m.text}`;
  const side = capLines(found.map((m) => line(m) + "\n"), agent.m.limits.sidecar_bytes);
  found = found.slice(0, side.kept);
  const head = found.slice(0, limit);
  const sidecar = writeSidecar(session, "grep", side.text);
  return { data: { matches: head, total: found.length, head: head.map(line).join("\n") }, truncated: true, output_path: sidecar, capped: side.capped, ...extra };
}

// ----------------------------------------------------------------------- the harness

const state = { agents: new Map(), sessions: new Map(), pending: null, asks: 0 };

function rulesOf(agent, session) { return [...agent.m.rules, ...agent.project, ...session.rules]; }

function envelope(tool, started, body) {
  // A tool the agent has not enabled is unknown to it: kind `other` (ENVL-2, TOOL-10).
  const known = !(body.error && body.error.code === "unknown_tool");
  const meta = { duration_ms: Math.max(0, Math.round(performance.now() - started)), tool, kind: (known && KINDS[tool]) || "other" };
  if (body.error) {
    const e = body.error;
    meta.error_code = e.code;
    if (e instanceof Refusal) meta.refusal = { layer: e.layer, code: e.code, ...(e.scope ? { scope: e.scope, rule_index: e.rule_index } : {}), ...e.extra };
    return { type: "error", error_text: e.message, metadata: meta };
  }
  if (body.truncated) meta.truncated = true;
  if (body.output_path) meta.output_path = body.output_path;
  if (body.capped) meta.output_capped = true;
  if (body.withheld) meta.withheld = body.withheld;
  return { type: "output", data: body.data, metadata: meta };
}

// Table 3: the accesses of each tool, in order (edit reads, then writes).
const ACCESS_MODES = { read: ["read"], write: ["write"], edit: ["read", "write"], glob: ["read"], grep: ["read"] };
const SEARCHES = new Set(["glob", "grep"]);

function subjectsFor(tool, args, agent, session) {
  const ws = agent.workspace;
  if (!ws) throw new Refusal("capability", "no_workspace", "there is no workspace, so no path can be resolved");
  const target = SEARCHES.has(tool) ? (args.path || ws) : args.path;
  const p = canonicalize(target, ws);
  const subjects = [];
  for (const mode of ACCESS_MODES[tool]) {
    // CAP-2: the session's sidecar directory is readable.
    const scope = mode === "write" ? agent.m.fsWrite : [...agent.m.fsRead, session.sidecars];
    let ok = scope.some((pat) => pat.re.test(p));
    if (!ok && SEARCHES.has(tool)) ok = scope.some((pat) => within(literalBase(pat.text), p)); // CAP-9
    if (!ok) {
      if ((mode === "write" ? agent.m.fsWrite : agent.m.fsRead).length === 0) throw new Refusal("capability", "empty_scope", `path: the manifest grants no fs.${mode} scope`);
      throw new Refusal("capability", "out_of_scope", `path: the path is outside the fs.${mode} scope`);
    }
    if (mode === "write" && (isProtected(p) || agent.m.agentFiles.has(p))) throw new Refusal("capability", "protected", "path: writing this path is never allowed");
    subjects.push({ tool, capability: `fs.${mode}`, kind: "path", value: p });
  }
  return { resolved: p, subjects };
}

function literalBase(text) {
  const comps = text.split("/").filter(Boolean);
  const out = [];
  for (const c of comps) { if ([...c].some(isWild) || c.includes("\\")) break; out.push(c); }
  return "/" + out.join("/");
}

function execute(tool, args, resolved, agent, session) {
  if (tool === "read") return toolRead(args, resolved, agent.m.limits);
  if (tool === "write") return toolWrite(args, resolved, agent);
  if (tool === "edit") return toolEdit(args, resolved, agent);
  if (tool === "grep") return toolGrep(args, resolved, agent, session);
  return toolGlob(args, resolved, agent, session);
}

function finish(call, started) {
  try { return { envelope: envelope(call.tool, started, execute(call.tool, call.args, call.resolved, call.agent, call.session)) }; }
  catch (e) {
    if (e instanceof ToolError || e instanceof Refusal) return { envelope: envelope(call.tool, started, { error: e }) };
    return { envelope: envelope(call.tool, started, { error: new ToolError("internal_error", "internal error") }) };
  }
}

function opCall(req) {
  const agent = state.agents.get(req.agent);
  if (!agent) return { error: { message: "unknown agent" } };
  const session = openSession(req, agent);
  if (session.error) return session;
  const tool = req.tool, args = req.args ?? {};
  const started = performance.now();
  if (!agent.m.tools.includes(tool)) return { envelope: envelope(tool, started, { error: new Refusal("schema", "unknown_tool", "this tool is not enabled for the agent") }) };
  if (session.closed) return { envelope: envelope(tool, started, { error: new Refusal("session", "session_closed", "the session is closed") }) };
  if (!SUPPORTED.has(tool)) return { skip: { reason: `tool ${tool} is not implemented by this harness` } };
  const problem = validate(tool, args);
  if (problem) return { envelope: envelope(tool, started, { error: new Refusal("schema", "invalid_arguments", `invalid arguments: ${problem}`) }) };
  let checked;
  try { checked = subjectsFor(tool, args, agent, session); }
  catch (e) { if (e instanceof Refusal) return { envelope: envelope(tool, started, { error: e }) }; throw e; }
  const decisions = checked.subjects.map((s) => decide(rulesOf(agent, session), s));
  // PERM-11: the most restrictive decision; the first subject that has it is reported.
  const worst = decisions.reduce((a, d) => (RANK[d.action] > RANK[a.action] ? d : a), decisions[0]);
  const call = { tool, args, resolved: checked.resolved, subjects: checked.subjects, decisions, agent, session, started };
  if (worst.action === "deny") {
    // PERM-13: scope, 1-based number, permission and action; never the pattern.
    const r = worst.rule;
    const e = new Refusal("permission", "denied", `denied by ${r.scope} rule #${r.index + 1} (${r.permission} → ${r.action})`);
    e.scope = r.scope; e.rule_index = r.index;
    return { envelope: envelope(tool, started, { error: e }) };
  }
  if (worst.action === "ask") {
    if (session.mode === "headless") return { envelope: envelope(tool, started, { error: new Refusal("ask", "headless", HEADLESS_TEXT, { asked_by: "permission" }) }) };
    state.pending = { id: `ask-${++state.asks}`, call };
    const asked = checked.subjects.filter((_, i) => decisions[i].action === "ask");
    return { ask: { id: state.pending.id, type: "permission", tool, kind: KINDS[tool], layer: "permission", subjects: asked.map((s) => `${s.capability} ${s.value}`), options: ["allow_once", "allow_always", "reject_once", "reject_always"] } };
  }
  return finish(call, started);
}

function opAnswer(req) {
  const p = state.pending;
  if (!p || p.id !== req.ask) return { error: { message: "no pending ask with that id" } };
  state.pending = null;
  const { call } = p;
  const choice = req.choice;
  if (choice === "allow_always" || choice === "reject_always") {
    // ASK-3/ASK-4: one exact rule per subject whose decision was ask, appended to the session scope.
    const action = choice === "allow_always" ? "allow" : "deny";
    call.subjects.forEach((s, i) => {
      if (call.decisions[i].action !== "ask") return;
      const exact = s.value === "" ? "*" : escapeGlob(s.value);
      addSessionRules(call.session, [{ permission: s.tool, pattern: exact, action }], call.agent);
    });
  }
  if (choice === "allow_once" || choice === "allow_always") return finish(call, call.started);
  if (choice === "reject_once" || choice === "reject_always") return { envelope: envelope(call.tool, call.started, { error: new Refusal("ask", "rejected", "the user declined this call", { asked_by: "permission" }) }) };
  if (choice === "cancelled") return { envelope: envelope(call.tool, call.started, { error: new Refusal("ask", "cancelled", "the permission request was cancelled", { asked_by: "permission" }) }) };
  return { error: { message: "choice must be allow_once, allow_always, reject_once, reject_always or cancelled" } };
}

function openSession(req, agent) {
  let s = state.sessions.get(req.session);
  const mode = req.mode || "headless";
  if (!s) {
    // TRUNC-6: a private working directory for sidecars; the session scope starts with the rule
    // (read, the escaped directory + "/**", allow) at index 0, so the host's rules count from 1.
    const workdir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "node-harness-session-")));
    fs.chmodSync(workdir, 0o700);
    const sidecars = compilePathPattern(escapeGlob(workdir) + "/**");
    s = { agent: req.agent, mode, workdir, sidecars, count: 1, rules: [{ scope: "session", index: 0, permission: "read", action: "allow", star: false, path: sidecars }] };
    state.sessions.set(req.session, s);
  } else if (s.agent !== req.agent) return { error: { message: "the session belongs to another agent" } };
  else if (s.mode !== mode) return { error: { message: "a session's mode cannot change" } };
  return s;
}

function addSessionRules(session, rules, agent) {
  session.rules.push(...compileRules(rules, "session", agent.bindings, agent.workspace, agent.m.knownCaps, session.count));
  session.count += rules.length;
}

function closeSession(name) {
  const s = state.sessions.get(name);
  if (!s) return;
  s.closed = true;
  s.rules = [];
  fs.rmSync(s.workdir, { recursive: true, force: true });
}

function bindingsFor(workspace, b) {
  return { workspace: workspace ? [workspace] : [], "ad-hoc": (b["ad-hoc"] || []).map((p) => fs.realpathSync(p)), "user-data": b["user-data"] ? [fs.realpathSync(b["user-data"])] : [] };
}

function opCompile(req) {
  const workspace = req.workspace ? fs.realpathSync(req.workspace) : null;
  const bindings = bindingsFor(workspace, req.bindings || {});
  if (req.watchdog) return { skip: { reason: "host watchdogs are not supported" } };
  let m;
  try { m = compileManifest(req.manifest, workspace, bindings); }
  catch (e) { if (e instanceof CompileError) return { result: { compile_error: { message: e.message } } }; throw e; }
  const unsupported = m.tools.filter((t) => !SUPPORTED.has(t));
  if (unsupported.length) return { skip: { reason: `tools not implemented by this harness: ${unsupported.join(", ")}` } };
  for (const [name, s] of state.sessions) if (s.agent === req.agent) { closeSession(name); state.sessions.delete(name); }
  state.agents.set(req.agent, { m, workspace, bindings, project: [] });
  return {
    result: {
      effective: { fs: { read: m.fsRead.map((p) => p.text), write: m.fsWrite.map((p) => p.text) }, net: { hosts: m.hosts }, shell: [], capabilities: m.caps },
      tools: Object.fromEntries(m.tools.map((t) => [t, { kind: KINDS[t] }])),
    },
  };
}

function opSetRules(req) {
  const agent = state.agents.get(req.agent);
  if (!agent) return { error: { message: "unknown agent" } };
  try {
    if (req.scope === "project") agent.project = compileRules(req.rules, "project", agent.bindings, agent.workspace, agent.m.knownCaps);
    else {
      compileRules(req.rules, "session", agent.bindings, agent.workspace, agent.m.knownCaps); // all or nothing
      const s = openSession(req, agent);
      if (s.error) return s;
      addSessionRules(s, req.rules, agent);
    }
  } catch (e) { if (e instanceof CompileError) return { result: { compile_error: { message: e.message } } }; throw e; }
  return { result: {} };
}

function handle(req) {
  switch (req.op) {
    case "start":
      return { result: { protocol: PROTOCOL, implementation: { name: "node-mini", version: "0.2.0", language: "javascript", spec_version: "3" }, features: FEATURES } };
    case "reset":
      for (const name of state.sessions.keys()) closeSession(name);
      state.agents.clear(); state.sessions.clear(); state.pending = null;
      return { result: {} };
    case "compile": return opCompile(req);
    case "set_rules": return opSetRules(req);
    case "call": return opCall(req);
    case "answer": return opAnswer(req);
    case "close":
      closeSession(req.session);
      state.pending = null;
      return { result: {} };
    default: return { error: { message: `unknown op ${req.op}` } };
  }
}

const rl = readline.createInterface({ input: process.stdin, terminal: false });
rl.on("line", (line) => {
  if (!line.trim()) return;
  let req;
  try { req = JSON.parse(line); } catch { process.stdout.write(JSON.stringify({ seq: null, error: { message: "request is not valid JSON" } }) + "\n"); return; }
  let reply;
  try { reply = handle(req); }
  catch (e) { reply = { error: { message: `${e.name} in ${req.op}`, details: String(e.stack || e).slice(0, 2000) } }; }
  process.stdout.write(JSON.stringify({ seq: req.seq, ...reply }) + "\n");
});
