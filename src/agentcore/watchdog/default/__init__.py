"""The default watchdog (WDOG): fixed heuristics that can only narrow a call.

It runs after the capability check and the permission rules, so everything
it sees is already in scope; its job is to catch in-scope calls that are
still dangerous: sending data out, destroying things, running code smuggled
in through arguments, and touching well-known secret files.

Decisions are made per simple command on argv alone. The parser flattens
pipelines, so `cat f | curl ...` is just two commands here; that is enough
because every network client that would consume a pipe (curl/wget with a
data flag or `@-`, nc, socat, ssh, telnet) is refused on its own argv.

Reasons name the category in words and never contain argument values
(a URL, a token or a file name may be a secret).

Modules, one concern each:
  core           DefaultWatchdog, the categories, the verdict, default_watchdog_for
  programs       THE program table: every known program, how its arguments run code, category, verdicts
  dispatch       one simple command: env prefixes, redirections, program name -> check (from programs)
  paths          resolving words against the workspace; the per-call state (_Ctx)
  options        GNU-style option scanning shared by the checks (getopt_long abbreviations)
  secrets        well-known secret files
  exfiltration   curl/wget/nc/socat/ssh/scp/sftp/rsync/openssl
  destructive    rm -r, chmod/chown -R, dd, truncate
  git            git global options and subcommands
  wrappers       shells, builtins, wrappers, find/fd, tar/rg/zip hooks
  sed, awk       the two stream editors' command lines and programs, read with their grammars
  interpreters   python/node/perl/…, deno/bun, make, npm/yarn/pnpm and runners
  hooks          options that name a program or plugin: sort, split, sdiff, diff3, cmake -E, compilers, linkers
  repls          REPL-like programs whose argv carries script text: sqlite3, psql, mysql, m4, dc, other REPLs
  projects       build tools, test runners and package managers that run workspace code: pip, go, docker…

To teach the watchdog a program, add a row to programs.PROGRAMS (and name
it in SPEC.md section 9; a test checks both).
"""

from __future__ import annotations

from .core import CATEGORIES, INTERNAL_CATEGORY, DefaultWatchdog, default_watchdog_for, unknown_categories

__all__ = ["CATEGORIES", "INTERNAL_CATEGORY", "DefaultWatchdog", "default_watchdog_for", "unknown_categories"]
