"""Files that execute code later and so are never writable by the agent (CAP-8, ENV-7).

The same data feeds the capability check (the write/edit tools and shell
redirections), the runtime's re-check at the moment of use, and the sandbox
(read-only binds, the `.git` placeholders and the sweep after each command),
so what the engine refuses and what the sandbox undoes cannot drift apart.

What belongs here: configuration that some program runs, or turns into a
command, *without the user choosing to run the project's code*: when a
shell starts, when the user enters a directory, when git runs (hooks,
fsmonitor, filters, aliases), when an editor or an agent opens the folder,
when a commit or a push happens (hook managers, CI). Project source and
build files (`Makefile`, `package.json`, `conftest.py`) are not listed:
running them is the user's choice, and the watchdog asks before the
sandbox runs them.

A path is protected when

1. one of its components is in `PROTECTED_NAMES` or `PROTECTED_DIRS`
   (`.git` included: a `.git` file or directory at any depth, and
   everything beneath it), ends in one of `PROTECTED_SUFFIXES`, or is a
   `*.pth` file directly in a `site-packages` or `dist-packages` directory;
2. a run of its components equals one of `PROTECTED_SEQUENCES`
   (`.config/git`, `.local/bin`, ...);
3. it lies in a *layout* or would complete one (see `layout_reason`): a
   git directory layout, or a Python virtual environment (a directory
   holding `pyvenv.cfg`) or conda environment (holding `conda-meta`), whose
   interpreter, activation scripts and start-up modules an editor runs on
   its own;
4. it is, or lies beneath, a directory some repository's configuration
   names with `core.hooksPath`, or is a file a configuration includes
   (`write_protection`, using `gitconfig`);
5. it is one of the runtime's own files: the manifest, the project rules,
   and the installation the runtime runs from (`runtime_paths`).
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .timestamps import recent

if TYPE_CHECKING:
    from . import gitconfig  # imported where it is used: a command line that writes nothing saves 1.5 ms

# Names protected wherever they appear, as the last component or above it.
PROTECTED_NAMES: frozenset[str] = frozenset(
    {
        # shells read these when they start
        ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
        ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".cshrc", ".tcshrc", ".kshrc",
        # ... or source from those (Debian's and Ubuntu's .bashrc sources .bash_aliases); readline's macros can
        # type a command at every Enter; terminal multiplexers and X sessions run commands when they start
        ".bash_aliases", ".inputrc", ".tmux.conf", ".screenrc", ".xinitrc", ".xprofile", ".xsession", ".xsessionrc",
        # editors load these at every start, wherever they are opened
        ".emacs",
        # entering a directory: direnv, mise
        ".envrc", ".mise.toml", "mise.toml", ".mise.local.toml", "mise.local.toml",
        # asdf and mise pick the program a shim runs from this, and `path:` versions name any directory
        ".tool-versions",
        # git reads these in the work tree or the home directory
        ".gitconfig", ".gitmodules", ".gitattributes", ".lfsconfig",
        # hook managers read their configuration when a hook fires
        ".pre-commit-config.yaml", "lefthook.yml", ".lefthook.yml", "lefthook.yaml", ".lefthook.yaml",
        "lefthook-local.yml", ".lefthook-local.yml", ".overcommit.yml",
        ".huskyrc", ".huskyrc.json", ".huskyrc.js",
        ".lintstagedrc", ".lintstagedrc.json", ".lintstagedrc.yaml", ".lintstagedrc.yml",
        ".lintstagedrc.js", ".lintstagedrc.cjs", ".lintstagedrc.mjs",
        "lint-staged.config.js", "lint-staged.config.cjs", "lint-staged.config.mjs",
        # CI services run these on push
        ".gitlab-ci.yml", ".travis.yml", "azure-pipelines.yml", "bitbucket-pipelines.yml", "Jenkinsfile",
        ".drone.yml", ".woodpecker.yml", "appveyor.yml", ".appveyor.yml", ".cirrus.yml", ".gitpod.yml",
        # editors and agents run commands or servers these name when the folder is opened
        ".mcp.json", ".devcontainer.json", "opencode.json", "opencode.jsonc", ".aider.conf.yml",
        "kilo.json", "kilo.jsonc",  # Kilo Code's project configuration: the MCP servers it starts
        ".crush.json", "crush.json",  # Crush runs `$(...)` in them when it loads, and starts their MCP and LSP commands
        # Eclipse (and the Java language server editors start) builds on opening: `.project` names the builders
        # it runs, `.factorypath` the annotation-processor jars the compiler loads, `.classpath` what it compiles against
        ".project", ".factorypath", ".classpath",
        ".exrc", ".nvimrc", ".nvim.lua", ".vimrc", ".gvimrc", ".dir-locals.el", ".dir-locals-2.el",
        # search and package tools
        ".ripgreprc", ".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs",
        # package managers read these on every install (an index the agent names serves the packages whose
        # install scripts run), and bun's `preload` runs before every `bun run` and `bun test`
        "uv.toml", "bunfig.toml", ".bunfig.toml", ".condarc",
        # toolchain managers and build tools read these on any invocation, even `--version`
        # (rustup runs the toolchain a `path` names; bazel runs `--workspace_status_command`)
        "rust-toolchain", "rust-toolchain.toml", ".bazelrc",
        # interpreters and debuggers run these from the working directory when they start
        ".pdbrc", ".Rprofile", ".irbrc", ".pryrc", ".gdbinit", ".lldbinit",
        # Python imports these from its path at every start (`site`), with the `.pth` files below
        "sitecustomize.py", "usercustomize.py",
    }
)
# Directories whose whole content is protected wherever they appear.
PROTECTED_DIRS: frozenset[str] = frozenset(
    {
        ".git",  # a repository (directory) or a pointer to one (file), with everything beneath
        ".githooks", ".husky", ".lefthook",  # hook directories by convention
        ".github", ".gitlab", ".gitea", ".forgejo", ".circleci", ".buildkite", ".woodpecker",
        ".azure-pipelines", ".semaphore",  # CI
        ".devcontainer", ".vscode", ".idea", ".zed", ".theia", ".fleet",  # editors
        ".agentcore", ".claude", ".cursor", ".windsurf", ".continue", ".gemini", ".codex", ".opencode",
        ".amazonq", ".kiro", ".roo", ".qwen", ".openhands",  # agents (OpenHands runs .openhands/setup.sh each session)
        ".clinerules", ".kilocode", ".kilo",  # agents: Cline runs the scripts in .clinerules/hooks, Kilo Code starts MCP servers
        ".helix", ".idx",  # editors: Helix's languages.toml names language servers, IDX's dev.nix start hooks
        ".externalToolBuilders", ".settings",  # Eclipse: the programs its automatic builds run, annotation processing
        ".mise", ".ssh",
        # direnv's layout directory: `layout python|ruby|perl|go|julia` put its bin directories on PATH, and
        # `layout python` adopts an environment it finds there instead of making one
        ".direnv",
        # the home directory's tool managers: shells source their scripts, their shims and bin come first on PATH
        ".nvm", ".sdkman", ".pyenv", ".rbenv", ".nodenv", ".asdf", ".volta", ".rustup",
        ".pip",  # pip's old user configuration directory (`pip.conf`: the index every install uses)
        ".vim", ".emacs.d",  # editors' plugin and init directories, loaded at every start
        ".ipython", ".jupyter",  # IPython runs its profiles' startup scripts, Jupyter its config files, at every start
        # programs these configure run on every use: AWS `credential_process`, kubeconfig `exec`, gpg-agent's pinentry
        ".aws", ".kube", ".gnupg",
        ".hg", ".jj",  # other version control systems: their repository config names hooks
        ".cargo", ".mvn",  # build configuration read on every invocation (runners, JVM options, extensions)
    }
)
# Name endings protected wherever they appear: a VS Code workspace file holds settings and tasks, and a
# task can run when the workspace is opened, as with `.vscode/tasks.json`; a Sublime Text project file's
# settings can define the language servers Sublime's LSP package starts when a file is opened.
PROTECTED_SUFFIXES: tuple[str, ...] = (".code-workspace", ".sublime-project")
# Runs of components protected wherever they appear (home-directory configuration mostly).
PROTECTED_SEQUENCES: tuple[tuple[str, ...], ...] = (
    (".config", "git"), (".config", "systemd"), (".config", "autostart"), (".config", "environment.d"),
    (".config", "direnv"), (".config", "fish"), (".config", "mise"), (".config", "Code", "User"),
    (".local", "bin"),
    # Docker's credential helpers and CLI plugins, Gradle's init scripts and JVM options: run on every use
    (".docker", "config.json"), (".docker", "cli-plugins"), (".gradle", "init.d"), (".gradle", "gradle.properties"),
    # the user configuration of pip, uv, conda and Maven: the index or mirror every later install uses
    (".config", "pip"), (".config", "uv"), (".config", "conda"), (".m2", "settings.xml"),
    # editors' and tmux's XDG configuration, loaded at every start
    (".config", "nvim"), (".config", "emacs"), (".config", "tmux"),
    # Bun's and Deno's bin directories come first on PATH (`node_modules/.bun` and `.deno` are package stores)
    (".bun", "bin"), (".deno", "bin"),
    # mise's other project configuration files (hooks run and `_.source` scripts sourced on entering the directory)
    (".config", "mise.toml"), (".config", "mise.local.toml"), ("mise", "config.toml"), ("mise", "config.local.toml"),
    # a virtual environment's activation scripts: shell plugins source `<dir>/bin/activate` when the shell enters
    # a directory holding one (oh-my-zsh's `auto_vrun`, pyautoenv), pyvenv.cfg or not; editors run `activate_this.py`
    ("bin", "activate"), ("bin", "activate.csh"), ("bin", "activate.fish"), ("bin", "activate.nu"),
    ("bin", "Activate.ps1"), ("bin", "activate_this.py"),
)
# Python's `site` module reads every `*.pth` file directly in these directories at each start of an
# interpreter whose path holds them (a virtual environment's, the user site) and runs its `import`
# lines: editing one runs code whenever that environment's Python starts, editors' tooling included.
SITE_DIRS: frozenset[str] = frozenset({"site-packages", "dist-packages"})
STARTUP_SUFFIX = ".pth"
# A directory holding HEAD and either commondir or both objects and refs is a git directory:
# git opens it as a (bare) repository, reading its config and running its hooks.
GIT_MARKERS: frozenset[str] = frozenset({"HEAD", "objects", "refs", "commondir"})
# A directory holding pyvenv.cfg is a Python virtual environment. Editors find one in the folder and
# start its interpreter unasked, and a shell they open sources its activation script; that start runs
# `pyvenv.cfg`'s `home`, the `.pth` files and the modules they import (`_virtualenv`,
# `_distutils_hack`, editable installs' finders). Every part of it can make the next start run code.
VENV_MARKER = "pyvenv.cfg"
# The same for a conda (or pixi: `.pixi/envs/*`) environment, which also keeps the scripts activation
# sources (`etc/conda/activate.d`).
CONDA_MARKER = "conda-meta"
LAYOUT_MARKERS: frozenset[str] = GIT_MARKERS | {VENV_MARKER, CONDA_MARKER}
# Missing names the sandbox covers with a placeholder at the top of every writable root
# (so that not even the running command can make one: git finds a repository there).
PLACEHOLDER_NAMES: tuple[str, ...] = (".git",)

SEQUENCE_TAILS: frozenset[str] = frozenset(s[-1] for s in PROTECTED_SEQUENCES)


def is_git_layout(names: Iterable[str]) -> bool:
    """Whether a directory listing with these names is a git directory layout."""
    n = names if isinstance(names, (set, frozenset)) else set(names)
    return "HEAD" in n and ("commondir" in n or ("objects" in n and "refs" in n))


def layout_kind(names: Iterable[str]) -> str | None:
    """What a directory listing with these names is a layout of (rule 3), or None."""
    n = names if isinstance(names, (set, frozenset)) else set(names)
    if is_git_layout(n):
        return "git repository layout"
    if VENV_MARKER in n:
        return "Python virtual environment"
    if CONDA_MARKER in n:
        return "conda environment"
    return None


def is_environment(directory: str) -> bool:
    """Whether `directory` is a Python or conda environment (a layout of rule 3 by its marker alone)."""
    return any(os.path.lexists(os.path.join(directory, m)) for m in (VENV_MARKER, CONDA_MARKER))


def is_layout(names: Iterable[str]) -> bool:
    """Whether a directory listing with these names is a layout: a git directory or a Python or conda environment."""
    return layout_kind(names) is not None


def name_reason(name: str) -> str | None:
    """Why an entry called `name` is protected wherever it is (rule 1), or None."""
    if name in PROTECTED_DIRS:
        return "git repository" if name == ".git" else "configuration directory that runs commands"
    if name in PROTECTED_NAMES or name.endswith(PROTECTED_SUFFIXES):
        return "configuration file that runs commands"
    return None


def startup_file(parent_name: str, name: str) -> bool:
    """Whether an entry `name` directly in a directory called `parent_name` is a Python start-up file (rule 1)."""
    return name.endswith(STARTUP_SUFFIX) and parent_name in SITE_DIRS


def sequence_match(parts: Sequence[str]) -> bool:
    """Whether `parts` (a path's components) ends in one of PROTECTED_SEQUENCES (rule 2)."""
    if not parts or parts[-1] not in SEQUENCE_TAILS:
        return False
    return any(tuple(parts[-len(s):]) == s for s in PROTECTED_SEQUENCES if len(parts) >= len(s))


def protected_reason(path: Path | str, extra: Iterable[Path | str] = ()) -> str | None:
    """Why writing `path` is refused by rules 1, 2 and 5 (no filesystem access), or None.

    `path` must be canonical; `extra` holds the runtime's own files and any
    protected tree (a path equal to one of them, or beneath it, is protected).
    """
    p = os.fspath(path)
    for e in extra:
        e = os.fspath(e)
        if p == e or p.startswith(e.rstrip("/") + "/"):
            return "the manifest, its agents and skills, the host's records or the runtime itself"
    parts = Path(p).parts
    for i, part in enumerate(parts):
        why = name_reason(part)
        if why is not None:
            return why
        if part in SEQUENCE_TAILS and sequence_match(parts[: i + 1]):
            return "home configuration that runs commands"
        if i and startup_file(parts[i - 1], part):
            return "Python start-up file"
    return None


def markers_in(directory: str) -> set[str]:
    """The layout markers `directory` holds (rule 3), looked up one by one (no listing of the directory)."""
    out = set()
    for m in LAYOUT_MARKERS:
        if os.path.lexists(os.path.join(directory, m)):
            out.add(m)
    return out


def layout_reason(path: Path | str) -> str | None:
    """Rule 3: `path` lies in a layout (a git directory, a Python or conda environment), or creating it would complete one.

    Checked for every ancestor D of `path`: D already is a layout, or the
    component of `path` right below D is a marker that, with the markers D
    already holds, makes D a layout. So neither order of creation (config
    first, HEAD last, or the reverse) gets a layout built, while a plain
    `config` file or a lone `refs/` directory in a project stays writable.
    """
    parts = Path(os.fspath(path)).parts
    cur = parts[0] if parts else "/"
    for child in parts[1:]:
        have = markers_in(cur)
        kind = layout_kind(have) if have else None
        if kind is not None:
            return f"inside a {kind}"
        if child in LAYOUT_MARKERS:
            kind = layout_kind(have | {child})
            if kind is not None:
                return f"completes a {kind}"
        cur = os.path.join(cur, child)
    return None


# -- rule 4: what repository configuration names --------------------------------------

_cache_lock = threading.Lock()
_config_cache: dict[tuple[str, ...], tuple[tuple[object, ...], gitconfig.ConfigSet]] = {}


def _identity(paths: Sequence[str], since: int = 0) -> tuple[tuple[object, ...], bool]:
    """Each file's (dev, ino, size, mtime, ctime), and whether every ctime was old enough at `since` (ns)
    that a change from then on gets another one (`timestamps.recent`)."""
    out: list[object] = []
    settled = True
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            out.append(None)
            continue
        out.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        settled = settled and not recent(st.st_ctime_ns, since)
    return tuple(out), settled


def load_config(paths: Sequence[str]) -> gitconfig.ConfigSet:
    """`gitconfig.load(paths)`, cached while none of the files read (includes too) changes."""
    from . import gitconfig

    key = tuple(paths)
    with _cache_lock:
        hit = _config_cache.get(key)
    if hit is not None:
        files = [*key, *hit[1].files, *hit[1].includes]
        if _identity(files)[0] == hit[0]:
            return hit[1]
    # Stamped before reading: a file that changes while it is read, or that changed a moment before
    # (the same stamps could follow another change), is read again next time.
    started = time.time_ns()
    cfg = gitconfig.load(paths)
    ident, settled = _identity([*key, *cfg.files, *cfg.includes], started)
    if not settled:
        return cfg
    with _cache_lock:
        if len(_config_cache) > 256:
            _config_cache.clear()
        _config_cache[key] = (ident, cfg)
    return cfg


def repo_protected(repo: gitconfig.Repo) -> list[str]:
    """Hook directories and included files one repository's configuration names (absolute paths)."""
    from . import gitconfig

    cfg = load_config(repo.config_files())
    return [*gitconfig.hook_dirs(cfg, repo), *cfg.includes]


def global_protected(tops: Iterable[str | None] = ()) -> list[str]:
    """What the user's system and global git configuration names: includes, and hook directories
    (a relative global `core.hooksPath` applies in every repository, so against each of `tops`)."""
    from . import gitconfig

    cfg = load_config(gitconfig.global_config_files())
    out = list(cfg.includes)
    out += gitconfig.hook_dirs(cfg, None)
    for top in tops:
        if top:
            out += gitconfig.hook_dirs(cfg, gitconfig.Repo(top, os.path.join(top, ".git"), os.path.join(top, ".git")))
    return out


# -- rule 5: the runtime's own installation --------------------------------------------------

_OWN_PACKAGES = ("agentcore", "acp_adapter", "conformance")
# Prefixes Python shares with the rest of the system: only its own parts of them count.
_SHARED_PREFIXES = frozenset({"/", "/usr", "/usr/local"})


@functools.lru_cache(maxsize=1)
def runtime_paths() -> tuple[Path, ...]:
    """What this process runs its code from: its Python environment (a virtual environment or an
    installation of its own, whole; in a prefix shared with the system, the standard library, the
    interpreter and its shared library), the site directories on its path, and our packages'
    directories (an editable install keeps them in a source tree). An agent that could change them
    would run its code in the next runtime, or the next sandbox launcher and search process, outside
    any sandbox."""
    import site
    import sys
    import sysconfig

    prefixes = dict.fromkeys([sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix])  # in this order, every run
    found: list[str] = [p for p in prefixes if os.path.realpath(p) not in _SHARED_PREFIXES]
    found += [sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib"), sys.executable, getattr(sys, "_base_executable", "")]
    libdir, library = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDLIBRARY")
    if libdir and library:
        found.append(os.path.join(libdir, library))
    on_path = {os.path.realpath(p) for p in sys.path if p}
    sites = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    found += [d for d in sites if os.path.realpath(d) in on_path]
    # Our packages come in one distribution, side by side (found here without a search of sys.path).
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found += [os.path.join(top, name) for name in _OWN_PACKAGES]
    real = (Path(os.path.realpath(p)) for p in found if p and os.path.exists(p))
    return tuple(dict.fromkeys(p for p in real if os.fspath(p) not in _SHARED_PREFIXES))


def enclosing_repos(path: str) -> list[gitconfig.Repo]:
    """Every repository whose work tree holds `path`: a `.git` in `path` or any ancestor."""
    from . import gitconfig

    out: list[gitconfig.Repo] = []
    cur = os.fspath(path)
    while True:
        dotgit = os.path.join(cur, ".git")
        if os.path.lexists(dotgit):
            out.append(gitconfig.repo_at(dotgit))
        parent = os.path.dirname(cur)
        if parent == cur:
            return out
        cur = parent


def write_protection(path: Path | str, extra: Iterable[Path | str] = ()) -> str | None:
    """Why writing the canonical `path` is refused, by every rule; None when it is not protected.

    A repository or global configuration that cannot be read is a refusal
    (fail closed): it might name a hook directory holding `path`.
    """
    from . import gitconfig

    p = os.fspath(path)
    why = protected_reason(p, extra) or layout_reason(p)
    if why is not None:
        return why
    try:
        repos = enclosing_repos(os.path.dirname(p))
        named = [*global_protected(r.top for r in repos)]
        for r in repos:
            named += repo_protected(r)
    except gitconfig.GitConfigError:
        return "a git configuration that cannot be checked"
    if protected_reason(p, named) is not None:
        return "a git hook directory or included configuration"
    return None


def sandbox_protected_paths(roots: Iterable[Path], extra: Iterable[Path] = ()) -> list[Path]:
    """Paths the sandbox keeps read-only, or covers with a placeholder when missing, at the top of each root."""
    out: list[Path] = []
    for root in roots:
        for name in PLACEHOLDER_NAMES:
            out.append(root / name)
    out.extend(Path(e) for e in extra)
    return list(dict.fromkeys(out))
