"""The git configuration every sandboxed command runs with, whatever the repository says (ENV-14).

git runs commands that its configuration names: an fsmonitor on every
`git status`, hooks, pagers, editors, credential helpers, ssh commands,
clean/smudge filters (also on `git status`), textconv and external diff
programs, merge drivers, `!` aliases, upload-pack programs... A repository
in the workspace may say anything, so inside the sandbox:

- the system and global files are not read (`GIT_CONFIG_NOSYSTEM`,
  `GIT_CONFIG_GLOBAL=/dev/null`), and the variables that beat every file
  (editor, pager, askpass, ssh, proxy, allowed protocols) are fixed;
- command-line configuration (`GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n`, which
  beats every file and is passed on to submodule processes) sets the
  fixed keys to harmless values, and overrides every *named* key that
  any repository's configuration defines (`filter.<x>.*`,
  `diff.<x>.textconv`, `alias.<x>`, ...): those names are read from the
  configuration files on the host before the command starts.

Two keys cannot be overridden that way: git takes the *first*
`remote.<x>.uploadpack` / `receivepack` it reads. When a repository defines
one, the local transport that would run it (plain paths, `file://`) is
left out of `GIT_ALLOW_PROTOCOL` instead.

The harmless values keep ordinary work going (`git status`, `diff`, `log`,
`show`, `blame`); what they switch off fails visibly rather than quietly:
an external diff command becomes the empty program, which git reports it
cannot run.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..gitconfig import ConfigSet, Entry

# Variables that beat the configuration files, fixed for every command.
FIXED_ENV: dict[str, str] = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_SYSTEM": "/dev/null",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_EDITOR": "/bin/false",
    "GIT_SEQUENCE_EDITOR": "/bin/false",
    "GIT_ASKPASS": "/bin/false",
    "SSH_ASKPASS": "/bin/false",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_SSH_COMMAND": "ssh",
    "GIT_PROXY_COMMAND": "/bin/false",
    "GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh",
    "GIT_OPTIONAL_LOCKS": "0",
}

# Keys set whatever the files say (command-line configuration beats every file).
FIXED_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("safe.bareRepository", "explicit"),
    ("credential.helper", ""),  # an empty value empties the list of helpers
    ("protocol.ext.allow", "never"),
    ("log.showSignature", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("push.gpgSign", "false"),
    ("gpg.program", "gpg"),
    ("gpg.openpgp.program", "gpg"),
    ("gpg.x509.program", "gpgsm"),
    ("gpg.ssh.program", "ssh-keygen"),
    ("merge.default", "text"),
)

# (section, key) of a key with a subsection -> the harmless value, set for each subsection defined.
_NAMED: dict[tuple[str, str], str] = {
    ("filter", "clean"): "", ("filter", "smudge"): "", ("filter", "process"): "", ("filter", "required"): "false",
    ("diff", "textconv"): "cat", ("diff", "command"): "",
    ("merge", "driver"): "false",
    ("difftool", "cmd"): "false", ("difftool", "path"): "false",
    ("mergetool", "cmd"): "false", ("mergetool", "path"): "false",
    ("credential", "helper"): "",
    ("guitool", "cmd"): "false",
    ("browser", "cmd"): "false", ("browser", "path"): "false",
    ("man", "cmd"): "false", ("man", "path"): "false",
    ("hook", "command"): "true",
    ("sendemail", "tocmd"): "", ("sendemail", "cccmd"): "", ("sendemail", "headercmd"): "", ("sendemail", "smtpserver"): "",
}
# For a driver, every key of the family is set as soon as any one of them is defined (a filter with
# only `process` overridden would fall back to its `clean`). Not for diff drivers: an empty `command`
# that was never defined would turn every diff of those paths into a failing external diff.
_FAMILIES: dict[str, tuple[str, ...]] = {
    "filter": ("clean", "smudge", "process", "required"),
    "difftool": ("cmd", "path"),
    "mergetool": ("cmd", "path"),
    "browser": ("cmd", "path"),
    "man": ("cmd", "path"),
}
# Keys without a subsection that are overridden only when some file defines them
# (their harmless value differs from git's default behaviour).
_PLAIN_WHEN_DEFINED: dict[tuple[str, str], str] = {
    ("diff", "external"): "",
    ("core", "alternaterefscommand"): "true",
    ("interactive", "difffilter"): "cat",
    ("instaweb", "httpd"): "false",
    ("web", "browser"): "false",
    ("help", "browser"): "false",
    ("help", "format"): "man",
    ("man", "viewer"): "man",
    ("init", "templatedir"): "",
    ("sendemail", "tocmd"): "", ("sendemail", "cccmd"): "", ("sendemail", "headercmd"): "", ("sendemail", "smtpserver"): "",
}


def _override(e: Entry) -> list[tuple[str, str]]:
    """The harmless settings that answer one entry of a repository's configuration."""
    sec, sub, key = e.section, e.subsection, e.key
    if sec == "alias":
        # `[alias] x = ...` names the alias by its key; a value-less override makes it unusable.
        return [(f"alias.{sub}.{key}" if sub is not None else f"alias.{key}", "")]
    if sec == "pager" and sub is None:
        return [(f"pager.{key}", "false")]
    if sec == "submodule" and sub is not None and key == "update" and (e.value or "").lstrip().startswith("!"):
        return [(f"submodule.{sub}.update", "checkout")]
    if sec == "gpg" and sub == "ssh" and key == "defaultkeycommand":
        return [("gpg.ssh.defaultKeyCommand", "")]
    if sub is None:
        value = _PLAIN_WHEN_DEFINED.get((sec, key))
        return [] if value is None else [(f"{sec}.{key}", value)]
    if (sec, key) not in _NAMED:
        return []
    keys = _FAMILIES.get(sec, (key,))
    return [(f"{sec}.{sub}.{k}", _NAMED[(sec, k)]) for k in keys if (sec, k) in _NAMED]


def overrides(configs: Iterable[ConfigSet]) -> list[tuple[str, str]]:
    """The fixed settings plus one harmless setting for each named key the configurations define."""
    out: dict[str, str] = {k: v for k, v in FIXED_CONFIG}
    for cfg in configs:
        for e in cfg.entries:
            for k, v in _override(e):
                out.setdefault(k, v)
    return list(out.items())


# Keys git takes the *first* value of, so no later setting overrides them: a repository that
# defines one loses the transport that would run it (local paths, `file://`).
_FIRST_WINS = frozenset({("remote", "uploadpack"), ("remote", "receivepack")})
NO_FILE_PROTOCOL = "git:http:https:ssh"


def git_env(configs: Iterable[ConfigSet]) -> dict[str, str]:
    """The variables to add to the sandbox's environment for these repository configurations."""
    env = dict(FIXED_ENV)
    configs = list(configs)
    if any((e.section, e.key) in _FIRST_WINS and e.subsection is not None for c in configs for e in c.entries):
        env["GIT_ALLOW_PROTOCOL"] = NO_FILE_PROTOCOL
    pairs = overrides(configs)
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for i, (k, v) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = k
        env[f"GIT_CONFIG_VALUE_{i}"] = v
    return env
