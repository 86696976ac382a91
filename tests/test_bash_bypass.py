"""Classes of bypass 1-5 (shared/notes/permissions-and-sandbox.md) through the real pipeline.

Each case is refused by a named layer with a named code AND leaves the lab
tree byte-for-byte unchanged. Every manifest here allows the benign form of
the command (a control test proves it really runs and has its effect), so a
refusal is the pipeline's doing, not a missing requirement.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.watchdog import Verdict, WatchdogCall
from agentcore.watchdog.default import default_watchdog_for
from test_bash_support import (
    Lab,
    allow,
    arity,
    assert_os_refused,
    assert_ran,
    assert_refused,
    bash_manifest,
    lab_tree,
    require_bwrap,
)

pytestmark = [pytest.mark.bwrap, pytest.mark.anyio]

CAP, WDOG = "capability", "watchdog"


async def refused_without_effect(agent: Any, lab: Lab, command: str, layer: str, code: str, sentinels: Sequence[str] = ("S",)) -> None:
    before = lab.snapshot()
    env = await agent.call("bash", {"command": command})
    assert_refused(env, layer, code)
    assert lab.snapshot() == before
    for name in sentinels:
        assert not os.path.lexists(lab.ws / name)


# -- 1. chaining and parse gaps ------------------------------------------------------

CHAIN_SHELL = [arity("echo", 1), arity("echo", 2), arity("cat", 1), allow("cat"), allow("sh"), allow("bash"), allow("touch", "allowed.txt")]

CHAINING = [
    ("semicolon", "echo hi; touch S", CAP, "command_not_allowed"),
    ("and", "echo hi && touch S", CAP, "command_not_allowed"),
    ("or", "cat missing.txt || touch S", CAP, "command_not_allowed"),
    ("allowed-first", "touch allowed.txt; touch S", CAP, "command_not_allowed"),
    ("background", "echo hi & touch S", CAP, "shell_background"),
    ("newline", "echo hi\ntouch S", CAP, "command_not_allowed"),
    ("blank-lines", "echo hi\n\n\ntouch S\n", CAP, "command_not_allowed"),
    ("carriage-return", "echo hi\rtouch S", CAP, "shell_control_char"),
    ("crlf", "echo hi\r\ntouch S", CAP, "shell_control_char"),
    ("pipe-into-sh", "echo 'touch S' | sh", WDOG, "code_execution_wrapper"),
    ("pipe-into-bash", "echo 'touch S' | bash", WDOG, "code_execution_wrapper"),
    ("pipe-amp-into-sh", "echo 'touch S' |& sh", WDOG, "code_execution_wrapper"),
    ("heredoc-into-sh", "sh <<'EOF'\ntouch S\nEOF", WDOG, "code_execution_wrapper"),
    ("after-heredoc", "cat <<'EOF'\nx\nEOF\ntouch S", CAP, "command_not_allowed"),
    ("heredoc-unquoted", "cat <<EOF\n$(touch S)\nEOF", CAP, "shell_heredoc"),
    ("heredoc-unterminated", "cat <<'EOF'\nx\ntouch S", CAP, "shell_syntax"),
    ("very-long-chain", "echo a; " * 300 + "touch S", CAP, "shell_too_long"),
    ("twenty-first-command", "echo a && " * 20 + "touch S", CAP, "command_not_allowed"),
    ("double-dash", "echo -- ; touch S", CAP, "command_not_allowed"),
    ("brace-group", "{ echo hi; touch S; }", CAP, "command_not_allowed"),
    ("subshell", "(touch S)", CAP, "command_not_allowed"),
    ("negation", "! touch S", CAP, "command_not_allowed"),
    ("if", "if true; then touch S; fi", CAP, "shell_compound"),
    ("while", "while true; do touch S; break; done", CAP, "shell_compound"),
    ("function", "f() { touch S; }; f", CAP, "shell_function"),
    ("coproc", "coproc touch S", CAP, "shell_coproc"),
    ("nul-byte", "echo hi\x00; touch S", CAP, "shell_control_char"),
]


@pytest.mark.parametrize(("command", "layer", "code"), [c[1:] for c in CHAINING], ids=[c[0] for c in CHAINING])
async def test_chaining_and_parse_gaps_are_refused(agent_for: Callable[..., Any], lab: Lab, command: str, layer: str, code: str) -> None:
    await refused_without_effect(agent_for(CHAIN_SHELL), lab, command, layer, code, ("S", "allowed.txt"))


async def test_chaining_control_benign_forms_run_and_data_stays_data(agent_for: Callable[..., Any], lab: Lab) -> None:
    agent = agent_for(CHAIN_SHELL)
    assert assert_ran(await agent.call("bash", {"command": "touch allowed.txt"}))["exit_code"] == 0
    assert (lab.ws / "allowed.txt").is_file()
    # A here-doc body, a comment and a line continuation are data, not commands.
    data = assert_ran(await agent.call("bash", {"command": "cat <<'EOF'\ntouch S\nEOF"}))
    assert data["output"] == "touch S\n"
    data = assert_ran(await agent.call("bash", {"command": "echo hi # ; touch S"}))
    assert data["output"] == "hi\n"
    data = assert_ran(await agent.call("bash", {"command": "echo hi\\\ntouch S"}))
    assert data["output"] == "hitouch S\n"
    assert not os.path.lexists(lab.ws / "S")


SEPARATORS = ["; ", " && ", " || ", "\n", " | ", " |& ", " ;\n\n "]
WORDS = st.text(alphabet="abcXYZ019 ;&|$`'\"\\*?~{}()<>#=!", min_size=1, max_size=12).filter(lambda w: not w.startswith("-"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    parts=st.lists(st.one_of(WORDS.map(lambda w: ("echo", w)), st.just(("touch", "S"))), min_size=1, max_size=5),
    seps=st.lists(st.sampled_from(SEPARATORS), min_size=4, max_size=4),
)
async def test_any_chain_with_a_forbidden_command_runs_nothing(
    agent_for: Callable[..., Any], lab: Lab, parts: list[tuple[str, str]], seps: list[str]
) -> None:
    """Random chains of `echo <quoted text>` and `touch S`: refused as a whole iff touch appears, else
    every quoted word comes back verbatim (the parser and bash agree on what the words are)."""
    command = parts[0][0] + " " + shlex.quote(parts[0][1])
    for sep, (name, word) in zip(seps, parts[1:]):
        command += sep + name + " " + shlex.quote(word)
    agent = agent_for(CHAIN_SHELL)
    if any(name == "touch" for name, _ in parts):
        await refused_without_effect(agent, lab, command, CAP, "command_not_allowed")
        return
    data = assert_ran(await agent.call("bash", {"command": command}))
    assert data["exit_code"] == 0
    # With pipes only the last echo of each pipeline reaches the output; every line is one of our words.
    lines = data["output"].split("\n")
    assert lines[-1] == "" and all(line in {w for _, w in parts} for line in lines[:-1]), (command, data)
    assert not os.path.lexists(lab.ws / "S")


# -- 2. expansion and substitution --------------------------------------------------

EXPAND_SHELL = [arity("touch", 1), arity("echo", 1), arity("echo", 2), allow("echo")]

EXPANSION = [
    ("dollar-paren", "touch $(echo S)", CAP, "shell_substitution"),
    ("backticks", "touch `echo S`", CAP, "shell_substitution"),
    ("backticks-in-dquotes", 'touch "`echo S`"', CAP, "shell_substitution"),
    ("dollar-paren-in-dquotes", 'touch "$(echo S)"', CAP, "shell_substitution"),
    ("process-subst-in", "echo <(touch S)", CAP, "shell_process_substitution"),
    ("process-subst-out", "echo hi >(touch S)", CAP, "shell_process_substitution"),
    ("in-assignment", "X=$(touch S) echo hi", CAP, "shell_substitution"),
    ("in-default", "echo ${x:-$(touch S)}", CAP, "shell_expansion"),
    ("in-arith-subscript", "echo $((a[$(touch S)]))", CAP, "shell_arithmetic"),
    ("in-old-arith", "echo $[a[$(touch S)]]", CAP, "shell_arithmetic"),
    ("brace-list", "touch S{1,2}", CAP, "shell_brace"),
    ("brace-range", "touch S{1..2}", CAP, "shell_brace"),
    ("ifs-prefix", "IFS=x touch S", CAP, "shell_assignment"),
    ("ansi-c-name", "$'\\x74ouch' S", CAP, "shell_ansi_c"),
    ("ansi-c-arg", "touch $'\\x53'", CAP, "shell_ansi_c"),
    ("locale-quoting", 'touch $"S"', CAP, "shell_locale"),
    ("env-prefix", "X=1 touch S", CAP, "shell_assignment"),
    ("variable", "touch $HOME", CAP, "shell_expansion"),
    ("glob-star", "touch S*", CAP, "shell_glob"),
    ("glob-question", "touch S?", CAP, "shell_glob"),
    ("glob-bracket", "touch [S]", CAP, "shell_glob"),
    ("tilde", "touch ~/S", CAP, "shell_tilde"),
    ("tilde-after-equals", "touch S=~", CAP, "shell_tilde"),
]


@pytest.mark.parametrize(("command", "layer", "code"), [c[1:] for c in EXPANSION], ids=[c[0] for c in EXPANSION])
async def test_expansion_and_substitution_are_refused(agent_for: Callable[..., Any], lab: Lab, command: str, layer: str, code: str) -> None:
    await refused_without_effect(agent_for(EXPAND_SHELL), lab, command, layer, code, ("S", "S1", "S2", "S?", "S*", "[S]"))


async def test_expansion_control_literal_touch_runs(agent_for: Callable[..., Any], lab: Lab) -> None:
    env = await agent_for(EXPAND_SHELL).call("bash", {"command": "touch 'S$(x)'"})
    assert assert_ran(env)["exit_code"] == 0
    assert (lab.ws / "S$(x)").is_file()  # quoted: a literal file name, nothing executed


SPLIT_NAMES = ["to''uch S", "to\\uch S", '"touch" S', "t'ouc'h S", "\\touch S"]


@pytest.mark.parametrize("command", SPLIT_NAMES)
async def test_quote_split_command_name_is_the_command_it_runs(agent_for: Callable[..., Any], lab: Lab, command: str) -> None:
    # Not allowed when only echo is: the requirement is matched on what bash will run.
    await refused_without_effect(agent_for([arity("echo", 1)]), lab, command, CAP, "command_not_allowed")
    # And a manifest deny on `touch S` catches every spelling of it.
    deny = [{"permission": "*", "pattern": "*", "action": "allow"}, {"permission": "bash", "pattern": "touch S", "action": "deny"}]
    agent = agent_for([arity("touch", 1)], rules=deny)
    await refused_without_effect(agent, lab, command, "permission", "denied")
    assert assert_ran(await agent.call("bash", {"command": "touch T"}))["exit_code"] == 0  # control: the rule is narrow
    assert (lab.ws / "T").is_file()


# -- 3. wrappers and "read-only" tools that run code ---------------------------------

HOOK = "/usr/bin/touch S\n"

WRAPPERS: list[tuple[str, str, list[dict[str, Any]], str, str]] = [
    ("sh-c", "sh -c 'touch S'", [arity("sh", 2)], WDOG, "code_execution_wrapper"),
    ("bash-c", "bash -c 'touch S'", [arity("bash", 2)], WDOG, "code_execution_wrapper"),
    ("bash-lc", "bash -lc 'touch S'", [arity("bash", 2)], WDOG, "code_execution_wrapper"),
    ("bash-script", "bash hook", [arity("bash", 1)], WDOG, "code_execution_wrapper"),
    ("eval", "eval 'touch S'", [arity("eval", 1)], WDOG, "code_execution_wrapper"),
    ("source", "source hook", [arity("source", 1)], WDOG, "code_execution_wrapper"),
    ("dot", ". hook", [arity(".", 1)], WDOG, "code_execution_wrapper"),
    ("exec", "exec touch S", [arity("exec", 2)], WDOG, "code_execution_wrapper"),
    ("command", "command touch S", [arity("command", 2)], WDOG, "code_execution_wrapper"),
    ("env", "env touch S", [arity("env", 2)], WDOG, "code_execution_wrapper"),
    ("env-S", "env -S 'touch S'", [arity("env", 2)], WDOG, "code_execution_wrapper"),
    ("env-bash-env", "env BASH_ENV=hook bash a.txt", [arity("env", 3)], WDOG, "code_execution_wrapper"),
    ("env-path", "env PATH=. touch S", [arity("env", 3)], WDOG, "code_execution_wrapper"),
    ("timeout", "timeout 5 touch S", [arity("timeout", 3)], WDOG, "code_execution_wrapper"),
    ("nohup", "nohup touch S", [arity("nohup", 2)], WDOG, "code_execution_wrapper"),
    ("nice", "nice touch S", [arity("nice", 2)], WDOG, "code_execution_wrapper"),
    ("stdbuf", "stdbuf -o0 touch S", [arity("stdbuf", 3)], WDOG, "code_execution_wrapper"),
    ("setsid", "setsid touch S", [arity("setsid", 2)], WDOG, "code_execution_wrapper"),
    ("xargs", "echo S | xargs touch", [arity("echo", 1), arity("xargs", 1)], WDOG, "code_execution_wrapper"),
    ("find-exec", "find . -maxdepth 0 -exec touch S ';'", [arity("find", 7)], WDOG, "code_execution_wrapper"),
    ("find-delete", "find . -name a.txt -delete", [arity("find", 4)], WDOG, "code_execution_wrapper"),
    ("find-fprint", "find . -maxdepth 0 -fprint S", [arity("find", 5)], WDOG, "code_execution_wrapper"),
    ("git-fsmonitor", "git -c core.fsmonitor='touch S' status", [arity("git", 3)], WDOG, "code_execution_wrapper"),
    ("git-alias", "git -c alias.x='!touch S' x", [arity("git", 3)], WDOG, "code_execution_wrapper"),
    ("sed-e", "sed -n '1e touch S' a.txt", [arity("sed", 3)], WDOG, "code_execution_wrapper"),
    ("sed-w", "sed 'w S' a.txt", [arity("sed", 2)], WDOG, "code_execution_wrapper"),
    ("awk-system", "awk 'BEGIN{system(\"touch S\")}'", [arity("awk", 1)], WDOG, "code_execution_wrapper"),
    ("awk-print-to-file", "awk 'BEGIN{print 1 > \"S\"}'", [arity("awk", 1)], WDOG, "code_execution_wrapper"),
    ("tar-checkpoint", "tar --checkpoint=1 --checkpoint-action=exec='touch S' -cf /dev/null a.txt", [arity("tar", 5)], WDOG, "code_execution_wrapper"),
    ("rg-pre", "rg --pre ./hook alpha", [arity("rg", 3)], WDOG, "code_execution_wrapper"),
    ("python-c", "python3 -c 'open(\"S\", \"w\")'", [arity("python3", 2)], WDOG, "code_execution_wrapper"),
    ("perl-e", "perl -e 'open(F, \">S\")'", [arity("perl", 2)], WDOG, "code_execution_wrapper"),
    ("bash-env-prefix", "BASH_ENV=hook bash a.txt", [arity("bash", 1)], CAP, "shell_assignment"),
    ("path-prefix", "PATH=. touch S", [arity("touch", 1)], CAP, "shell_assignment"),
    ("basename-spoof", "./touch S", [arity("touch", 1)], CAP, "command_not_allowed"),
    ("path-spoof", "sub/touch S", [arity("touch", 1)], CAP, "command_not_allowed"),
]


@pytest.mark.parametrize(("command", "shell", "layer", "code"), [c[1:] for c in WRAPPERS], ids=[c[0] for c in WRAPPERS])
async def test_wrappers_and_code_running_tools_are_refused(
    agent_for: Callable[..., Any], lab: Lab, command: str, shell: list[dict[str, Any]], layer: str, code: str
) -> None:
    lab.git_init()
    for where in (lab.ws / "hook", lab.ws / "touch", lab.ws / "sub" / "touch"):
        where.write_text("#!/bin/sh\n" + HOOK)
        where.chmod(0o755)
    await refused_without_effect(agent_for(shell), lab, command, layer, code)
    assert (lab.ws / "a.txt").read_text() == "alpha\n"


async def test_workspace_program_allowed_by_manifest_still_needs_a_human(agent_for: Callable[..., Any], lab: Lab) -> None:
    tool = lab.ws / "touch"
    tool.write_text("#!/bin/sh\n" + HOOK)
    tool.chmod(0o755)
    agent = agent_for([arity("./touch", 1)])
    before = lab.snapshot()
    env = await agent.call("bash", {"command": "./touch S"})
    assert_refused(env, "ask", "headless")
    assert env.refusal is not None and env.refusal["asked_by"] == "watchdog"
    assert lab.snapshot() == before


async def test_wrapper_control_plain_touch_runs(agent_for: Callable[..., Any], lab: Lab) -> None:
    env = await agent_for([arity("touch", 1)]).call("bash", {"command": "touch S"})
    assert assert_ran(env)["exit_code"] == 0 and (lab.ws / "S").is_file()


# -- 4. writes through redirection or cwd -------------------------------------------

REDIRECT_SHELL = [arity("echo", 1), arity("cat", 1), arity("cd", 1), arity("mv", 2), allow("exec")]

REDIRECTS = [
    ("tilde-bashrc", "echo x > ~/.bashrc", CAP, "shell_tilde"),
    ("bashrc", "echo x > .bashrc", CAP, "protected"),
    ("profile-append", "echo x >> .profile", CAP, "protected"),
    ("nested-zshrc", "echo x > sub/.zshrc", CAP, "protected"),
    ("envrc", "echo x > .envrc", CAP, "protected"),
    ("gitmodules", "echo x > .gitmodules", CAP, "protected"),
    ("git-hook-append", "echo x >> .git/hooks/pre-commit", CAP, "protected"),
    ("git-config", "echo x > .git/config", CAP, "protected"),
    ("vscode", "echo x > .vscode/settings.json", CAP, "protected"),
    ("agent-config", "echo x > .agentcore/rules.yaml", CAP, "protected"),
    ("cd-then-mv", "cd sub && mv ../a.txt ../S", CAP, "shell_cwd_change"),
    ("cd-then-redirect", "cd .git && echo x > config", CAP, "shell_cwd_change"),
    ("stdout-outside", "echo x > ../outside/S", CAP, "out_of_scope"),
    ("stderr-outside", "echo x 2> ../outside/S", CAP, "out_of_scope"),
    ("both-outside", "echo x &> ../outside/S", CAP, "out_of_scope"),
    ("append-both-outside", "echo x &>> ../outside/target.txt", CAP, "out_of_scope"),
    ("clobber-outside", "echo x >| ../outside/S", CAP, "out_of_scope"),
    ("exec-redirect", "exec > ../outside/S", CAP, "out_of_scope"),
    ("group-redirect", "{ echo x; } > ../outside/S", CAP, "out_of_scope"),
    ("fd3-outside", "echo x 3> ../outside/S", CAP, "out_of_scope"),
]


@pytest.mark.parametrize(("command", "layer", "code"), [c[1:] for c in REDIRECTS], ids=[c[0] for c in REDIRECTS])
async def test_writes_through_redirection_or_cwd_are_refused(agent_for: Callable[..., Any], lab: Lab, command: str, layer: str, code: str) -> None:
    await refused_without_effect(agent_for(REDIRECT_SHELL), lab, command, layer, code, ("S", ".bashrc", ".profile", ".envrc", ".gitmodules", ".vscode", ".agentcore"))
    assert not (lab.outside / "S").exists()
    assert not (lab.ws / ".git" / "hooks").exists()


async def test_redirection_control_inside_workspace_runs(agent_for: Callable[..., Any], lab: Lab) -> None:
    env = await agent_for(REDIRECT_SHELL).call("bash", {"command": "echo x > sub/S 2>&1"})
    assert assert_ran(env)["exit_code"] == 0
    assert (lab.ws / "sub" / "S").read_text() == "x\n"


# -- 5. paths -----------------------------------------------------------------------

PATH_SHELL = [arity("echo", 1), arity("cat", 0), allow("cat")]


def _links(lab: Lab) -> None:
    (lab.ws / "to_out").symlink_to(lab.outside)
    (lab.ws / "to_target").symlink_to(lab.outside / "target.txt")
    (lab.ws / "dangling").symlink_to(lab.outside / "S")
    (lab.ws / "sub" / "up").symlink_to("../..")


PATHS = [
    ("dotdot", "echo x > ../outside/S", "out_of_scope"),
    ("dotdot-through-sub", "echo x > sub/../../outside/S", "out_of_scope"),
    ("prefix-sibling", "echo x > ../ws_evil/S", "out_of_scope"),
    ("absolute-prefix-sibling", "echo x > {root}/ws_evil/S", "out_of_scope"),
    ("symlink-dir", "echo x > to_out/S", "out_of_scope"),
    ("symlink-file", "echo x > to_target", "out_of_scope"),
    ("symlink-file-append", "echo x >> to_target", "out_of_scope"),
    ("dangling-symlink", "echo x > dangling", "unresolvable"),
    ("symlink-then-dotdot", "echo x > sub/up/outside/S", "out_of_scope"),
    ("double-slash", "echo x > {root}//outside/S", "out_of_scope"),
]


@pytest.mark.parametrize(("command", "code"), [c[1:] for c in PATHS], ids=[c[0] for c in PATHS])
async def test_paths_out_of_the_write_scope_are_refused(agent_for: Callable[..., Any], lab: Lab, command: str, code: str) -> None:
    _links(lab)
    await refused_without_effect(agent_for(PATH_SHELL), lab, command.format(root=lab.root), CAP, code)
    assert (lab.outside / "target.txt").read_text() == "original\n"
    assert not (lab.outside / "S").exists() and not (lab.root / "ws_evil" / "S").exists()


@pytest.mark.parametrize("command", ["cat < ../outside/target.txt", "cat < to_target", "cat 0< to_out/target.txt"])
async def test_reading_out_of_scope_through_redirection_is_refused(agent_for: Callable[..., Any], lab: Lab, command: str) -> None:
    _links(lab)
    await refused_without_effect(agent_for(PATH_SHELL), lab, command, CAP, "out_of_scope")


@pytest.mark.parametrize("command", ["echo x > .git/hooks/post-checkout", "echo x > newdir/.bashrc", "echo x > sub/.idea/workspace.xml"])
async def test_creating_missing_protected_files_by_redirection_is_refused(agent_for: Callable[..., Any], lab: Lab, command: str) -> None:
    await refused_without_effect(agent_for(PATH_SHELL), lab, command, CAP, "protected")
    assert not (lab.ws / "newdir").exists() and not (lab.ws / ".git" / "hooks").exists()


async def test_glob_metacharacters_in_the_workspace_name_do_not_widen_the_scope(make_agent: Callable[..., Any]) -> None:
    require_bwrap()
    with lab_tree("w[s]") as lab:
        (lab.root / "ws").mkdir()  # `w[s]` read as a glob would match this sibling
        agent = make_agent(lab.ws, bash_manifest(PATH_SHELL), engine_kwargs={"watchdog": "default"})
        await refused_without_effect(agent, lab, "echo x > ../ws/S", CAP, "out_of_scope")
        assert not (lab.root / "ws" / "S").exists()
        env = await agent.call("bash", {"command": "echo x > S"})
        assert assert_ran(env)["exit_code"] == 0 and (lab.ws / "S").read_text() == "x\n"


class SwapAfterCheck:
    """The default watchdog, plus a symlink swapped in after the capability check (the race the OS must catch)."""

    def __init__(self, inner: Any, victim: Path, target: Path) -> None:
        self.inner, self.victim, self.target = inner, victim, target

    async def review(self, call: WatchdogCall) -> Verdict:
        self.victim.unlink()
        self.victim.symlink_to(self.target)
        return await self.inner.review(call)


async def test_symlink_swapped_after_the_check_cannot_write_outside(engine: Callable[..., Any], open_session: Callable[..., Any], lab: Lab) -> None:
    victim = lab.ws / "notes.txt"
    victim.write_text("mine\n")
    eng = engine(lab.ws, bash_manifest([arity("echo", 1)]))
    eng.watchdog = SwapAfterCheck(default_watchdog_for(eng.manifest), victim, lab.outside / "target.txt")
    env = await eng.call(open_session(eng), "bash", {"command": "echo pwned > notes.txt"})
    assert "No such file or directory" in assert_os_refused(env)  # the outside tree is not in the sandbox
    assert (lab.outside / "target.txt").read_text() == "original\n"


async def test_existing_hard_link_to_an_outside_file_is_not_a_way_out(agent_for: Callable[..., Any], lab: Lab) -> None:
    os.link(lab.outside / "target.txt", lab.ws / "hl")
    env = await agent_for([arity("echo", 1)]).call("bash", {"command": "echo pwned > hl"})
    assert_refused(env, "capability", "hard_link")
    # Refused by the capability check or failed on the mounts: either way the outside file is intact.
    assert (lab.outside / "target.txt").read_text() == "original\n"
