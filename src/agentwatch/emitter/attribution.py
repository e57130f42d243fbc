"""Whose agent, in which repository, on which branch: learnt by the hook from git's files.

For a session's working directory the hook finds the repository git would (the nearest `.git`
folder or file above it: a worktree's or a submodule's `.git` file names its git directory), and
reads, never running `git`:
- the person: `user.email` of the repository's config, the global ~/.gitconfig and the XDG
  config ($XDG_CONFIG_HOME/git/config), the repository's winning as in git; else the OS user.
  AGENTWATCH_PERSON overrides it; AGENTWATCH_PERSON_MODE=hash sends a stable salted hash of it
  instead (the salt made once in the data dir), `off` sends nothing;
- the repository: the `origin` remote as `host/owner/name`, credentials, port and `.git` left out;
  a remote that is a local path gives its folder's name; no remote, the top-level folder's name;
- the branch: HEAD's branch, or the first 7 characters of its commit when detached.

The answer is kept per session in the data dir (`who/<session>`) with the state of HEAD and the
repository's config (inode, size, time): a later event of the session opens that one file and
stats those two, and learns again only when either changed (a branch switched) or the session's
cwd or the person settings did.

Standard library only: this module is on the hook's path (`posix`, not `os`: see config.py).
"""

from __future__ import annotations

import posix

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

FORMAT = "1"
SHORT_SHA = 7
MODES = ("name", "hash", "off")
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def _read(path: str, limit: int = 1 << 16) -> str:
    """The file's text ('' when it cannot be read)."""
    try:
        fd = posix.open(path, posix.O_RDONLY)
    except OSError:
        return ""
    try:
        return posix.read(fd, limit).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        posix.close(fd)


def _state(path: str) -> str:
    """What changes when git rewrites the file (it renames a new one into place)."""
    if not path:
        return ""
    try:
        st = posix.stat(path)
    except OSError:
        return "-"
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def _parent(path: str) -> str:
    return path.rpartition("/")[0] or "/"


def _join(base: str, path: str) -> str:
    """`path` taken from `base`, its `.` and `..` resolved (as git does, without the disk)."""
    parts: list[str] = []
    for part in (path if path.startswith("/") else f"{base}/{path}").split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part and part != ".":
            parts.append(part)
    return "/" + "/".join(parts)


def find_repository(cwd: str) -> tuple[str, str, str]:
    """(top-level folder, git directory, common git directory) of the repository holding `cwd`;
    ('', '', '') outside any."""
    folder = cwd.rstrip("/") or "/"
    while folder.startswith("/"):
        dot = f"{folder.rstrip('/')}/.git"
        try:
            st = posix.stat(dot)
        except OSError:
            st = None
        if st is not None:
            gitdir = dot
            if st.st_mode & 0o170000 != 0o040000:  # a file: `gitdir: <path>`
                line = _read(dot, 4096).strip()
                if not line.startswith("gitdir:"):
                    return "", "", ""
                gitdir = _join(folder, line[len("gitdir:") :].strip())
            common = _read(f"{gitdir}/commondir", 4096).strip()
            return folder, gitdir, _join(gitdir, common) if common else gitdir
        if folder == "/":
            break
        folder = _parent(folder)
    return "", "", ""


def parse_config(text: str, into: dict[str, str]) -> None:
    """The settings of one git config file, as `section.subsection.key` (section and key in lower
    case), added to `into` (a later file's value wins, as in git). Includes are not followed."""
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            head = line[1 : line.find("]")] if "]" in line else line[1:]
            name, _, sub = head.partition(" ")
            sub = sub.strip()
            if sub.startswith('"') and sub.endswith('"') and len(sub) >= 2:
                sub = sub[1:-1]
            section = f"{name.lower()}.{sub}" if sub else name.lower()
            line = line[line.find("]") + 1 :].strip() if "]" in line else ""
            if not line:
                continue
        key, eq, value = line.partition("=")
        value = value.strip() if eq else "true"
        if value.startswith('"'):
            value = value[1:].partition('"')[0]
        else:
            for mark in (" #", " ;", "\t#", "\t;"):
                value = value.partition(mark)[0]
        into[f"{section}.{key.strip().lower()}"] = value.strip()


def normalise_remote(url: str) -> str:
    """`host/owner/name` of a remote URL (scheme, credentials, port, query and `.git` left out);
    a local path's folder name; '' for nothing usable."""
    url = url.strip()
    if not url:
        return ""
    host, path = "", url
    if "://" in url:
        scheme, _, rest = url.partition("://")
        authority, _, path = rest.partition("/")
        if scheme == "file":
            authority = ""
        host = authority.rpartition("@")[2].partition(":")[0] if not authority.startswith("[") else ""
    elif ":" in url.partition("/")[0]:  # scp-like: [user@]host:owner/name
        authority, _, path = url.partition(":")
        host = authority.rpartition("@")[2]
    path = path.partition("?")[0].partition("#")[0].strip("/")
    if path.endswith(".git"):
        path = path[:-4].rstrip("/")
    if not host:
        path = path.rpartition("/")[2]
    found = f"{host.lower()}/{path}" if host else path
    return "".join(ch for ch in found if ch > " " and ch not in "@\x7f")


def branch_of(head: str) -> str:
    """The branch HEAD names, or its commit's short form when detached."""
    head = head.strip()
    if head.startswith("ref:"):
        ref = head[4:].strip()
        return ref[len("refs/heads/") :] if ref.startswith("refs/heads/") else ref
    return head[:SHORT_SHA]


def _os_user(environ: Mapping[str, str]) -> str:
    for name in ("USER", "LOGNAME", "USERNAME"):
        if environ.get(name):
            return environ[name]
    try:
        import pwd

        return str(pwd.getpwuid(posix.getuid()).pw_name)
    except (ImportError, KeyError):
        return ""


def _config_files(environ: Mapping[str, str], common: str) -> list[str]:
    home = environ.get("HOME", "")
    xdg = environ.get("XDG_CONFIG_HOME") or (f"{home}/.config" if home else "")
    found = [f"{xdg}/git/config"] if xdg else []
    if home:
        found.append(f"{home}/.gitconfig")
    if common:
        found.append(f"{common}/config")
    return found


def _salt(data_dir: str) -> bytes:
    """The data dir's salt for hashed persons, made once (the first writer's stays)."""
    path = f"{data_dir.rstrip('/')}/person-salt"
    kept = _read(path, 256).strip()
    if kept:
        return kept.encode()
    made = posix.urandom(16).hex()
    try:
        fd = posix.open(path, posix.O_WRONLY | posix.O_CREAT | posix.O_EXCL, 0o600)
    except FileExistsError:
        return (_read(path, 256).strip() or made).encode()
    try:
        posix.write(fd, made.encode())
    finally:
        posix.close(fd)
    return made.encode()


def hashed(person: str, data_dir: str) -> str:
    """A stable salted hash of `person`: the same on this host's every run, no email to read
    ('' when the data dir cannot keep a salt: never the person in clear)."""
    try:
        salt = _salt(data_dir)
    except OSError:
        return ""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # Python 3.12 renamed the C module
        from hashlib import sha256
    return "h-" + str(sha256(salt + person.encode("utf-8", "replace")).hexdigest())[:16]


def learn(cwd: str, environ: Mapping[str, str], data_dir: str) -> tuple[str, str, str, str, str]:
    """(person, repository, branch, HEAD's path, the repository config's path) for `cwd`."""
    top, gitdir, common = find_repository(cwd) if cwd.startswith("/") else ("", "", "")
    settings: dict[str, str] = {}
    for path in _config_files(environ, common):
        parse_config(_read(path), settings)
    mode = environ.get("AGENTWATCH_PERSON_MODE", "").strip().lower()
    person = ""
    if mode != "off":
        person = environ.get("AGENTWATCH_PERSON", "").strip() or settings.get("user.email", "")
        person = person or _os_user(environ)
        if mode == "hash" and person:
            person = hashed(person, data_dir)
    if not top:
        return person, "", "", "", ""
    repo = normalise_remote(settings.get("remote.origin.url", ""))
    if not repo:
        main = _parent(common) if common.endswith("/.git") else top
        repo = main.rstrip("/").rpartition("/")[2]
    branch = branch_of(_read(f"{gitdir}/HEAD", 4096))
    return person, repo, branch, f"{gitdir}/HEAD", f"{common}/config"


def _cache_path(data_dir: str, session_id: str) -> str:
    name = "".join(ch if ch in _SAFE else "_" for ch in session_id[:128])
    return f"{data_dir.rstrip('/')}/who/{name}"


def _settings_key(environ: Mapping[str, str]) -> str:
    return f"{environ.get('AGENTWATCH_PERSON_MODE', '')}|{environ.get('AGENTWATCH_PERSON', '')}"


def _keep(path: str, lines: list[str]) -> None:
    """Write the session's answer atomically (its folder made on first use); never raises."""
    tmp = f"{path}.{posix.getpid()}"
    try:
        try:
            fd = posix.open(tmp, posix.O_WRONLY | posix.O_CREAT | posix.O_TRUNC, 0o600)
        except FileNotFoundError:
            posix.mkdir(_parent(path), 0o700)
            fd = posix.open(tmp, posix.O_WRONLY | posix.O_CREAT | posix.O_TRUNC, 0o600)
        try:
            posix.write(fd, "\n".join(lines).encode("utf-8", "replace"))
        finally:
            posix.close(fd)
        posix.replace(tmp, path)
    except OSError:
        try:  # noqa: SIM105 - contextlib would cost the hook an import
            posix.unlink(tmp)
        except OSError:
            pass


def attribute(session_id: str, cwd: str, environ: Mapping[str, str], data_dir: str) -> tuple[str, str, str]:
    """(person, repository, branch) of a session's event: from the session's kept answer while
    HEAD, the repository's config, the cwd and the person settings are as they were; else learnt."""
    key = _settings_key(environ)
    path = _cache_path(data_dir, session_id) if session_id else ""
    if path:
        kept = _read(path, 8192).split("\n")
        if len(kept) == 8 and kept[0] == FORMAT and kept[1] == cwd and kept[2] == key:
            head, config = kept[3].split("\t"), kept[4].split("\t")
            same = len(head) == 2 and len(config) == 2 and _state(head[0]) == head[1]
            if same and _state(config[0]) == config[1]:
                return kept[5], kept[6], kept[7]
    person, repo, branch, head_path, config_path = learn(cwd, environ, data_dir)
    if path:
        clean = [v.replace("\n", " ").replace("\t", " ") for v in (person, repo, branch)]
        states = [f"{head_path}\t{_state(head_path)}", f"{config_path}\t{_state(config_path)}"]
        _keep(path, [FORMAT, cwd.replace("\n", " "), key.replace("\n", " "), *states, *clean])
    return person, repo, branch


def mark(
    envelopes: list[tuple[str, dict[str, Any]]],
    environ: Mapping[str, str],
    data_dir: str,
    log: Callable[[Mapping[str, str], str, str, BaseException], None],
) -> None:
    """Give every envelope of one hook run its session's person, repository and branch; `log`
    tells the crash log when git's files could not be read (the envelopes then go without)."""
    first = envelopes[0][1]
    cwd, session = first.get("cwd"), first.get("session_id")
    cwd, session = cwd if isinstance(cwd, str) else "", session if isinstance(session, str) else ""
    try:
        found = attribute(session, cwd, environ, data_dir)
    except Exception as exc:  # git's files it cannot read must not hold the event back
        log(environ, "attribution", "reading git's files failed; the event goes without", exc)
        return
    for _, env in envelopes:
        env["person"], env["repo"], env["branch"] = found
