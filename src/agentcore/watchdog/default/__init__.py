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
  dispatch       one simple command: env prefixes, redirections, program -> check table
  paths          resolving words against the workspace; the per-call state (_Ctx)
  options        GNU-style option scanning shared by the checks
  secrets        well-known secret files
  exfiltration   curl/wget/nc/socat/ssh/scp/sftp/rsync/openssl
  destructive    rm -r, chmod/chown -R, dd, truncate
  git            git global options and subcommands
  wrappers       shells, builtins, wrappers, find/fd, tar/rg/zip hooks
  sed, awk       script analysis for the two stream editors
  interpreters   python/node/perl/…, deno/bun, make, package managers and runners
"""

from __future__ import annotations

from .core import CATEGORIES, INTERNAL_CATEGORY, DefaultWatchdog, default_watchdog_for, unknown_categories

__all__ = ["CATEGORIES", "INTERNAL_CATEGORY", "DefaultWatchdog", "default_watchdog_for", "unknown_categories"]
