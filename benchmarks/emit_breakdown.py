"""Where the hook's time goes, against what `site` costs the bare interpreter: the budget.

`emit_bench.py --breakdown` runs this. The hook is at most 1.0x `python -c pass` when what it
does beyond `python -IS -c pass` costs no more than what `site` (and the interpreter's exit
after it) adds to `python -c pass`. Both are measured here in one run, interleaved:

- the budget: the CPU time of `python -c pass` minus that of `python -IS -c pass`, each started
  by /bin/sh as in emit_bench (the median of the paired differences);
- the hook's parts, by the CPU clock inside fresh `python -IS` processes that load the hook as its
  script does and run it: its modules (the installed script's lines before it imports the hook,
  compiled and run as each run does: its package and the file of its modules found, the file
  read and checked; then `agentwatch.emitter.hook` and what it imports), the wire
  client with `_socket` and the session counters (loaded by a run), and the run itself with the
  bus down (spooled) and up (the GENIE stream: until the hook hands the wait for its acks to a
  child, and leaves; its wall time too, which adds the wait for the server's greeting).

CPU time, not wall time: on a machine shared with other work, a process preempted for a few
milliseconds would move a wall-clock median of parts this small. (The waits are in emit_bench's
wall times.)
- each module's own import time under `-X importtime` (which slows imports: read it for their
  shares), medians.

What this leaves out: the `time` module the clock needs first (about 0.1 ms).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

# The installed script's lines before it imports the hook (its package put on sys.path, its
# bundle of modules found: emitter/bundle.py), run as they are, then the hook's parts one by one.
DRIVER = """
import time
t0 = time.process_time()
import posix, sys
__file__ = {script!r}
with open(__file__, encoding="utf-8") as script:
    exec(script.read().partition(\"from agentwatch.emitter.hook import main\")[0])
import agentwatch.emitter.hook as hook
t1 = time.process_time()
import _socket, agentwatch.emitter.sequence, agentwatch.emitter.wire
t2 = time.process_time()
w2 = time.perf_counter()
_exit = posix._exit
def leave(status=0):
    t3 = time.process_time()
    w3 = time.perf_counter()
    posix.write(2, ("%.6f %.6f %.6f %.6f\\n" % (t1 - t0, t2 - t1, t3 - t2, w3 - w2)).encode())
    _exit(status)
posix._exit = leave  # the run ends here, or where it hands the wait for acks to its child
hook._run["detach"] = True  # as main() lets it
hook.run_hook(argv=["agentwatch-emit"])
leave()
"""


def installed_script() -> str:
    """The installed `agentwatch-emit` beside this interpreter."""
    script = Path(sys.executable).parent / "agentwatch-emit"
    if not script.is_file():
        sys.exit(f"{script} is not installed: pip install -e . first")
    return str(script)


def _cpu(cmd: list[str], env: dict[str, str]) -> float:
    """The CPU time (user and system) of the process `cmd` starts (the shell, then what it execs)."""
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped here: Popen must not wait for it again
    return float(usage.ru_utime + usage.ru_stime)


def _parts(payload: bytes, env: dict[str, str], importtime: bool = False) -> tuple[list[float], str]:
    flags = ["-X", "importtime"] if importtime else []
    driver = DRIVER.format(script=installed_script())
    command = [sys.executable, "-IS", *flags, "-c", driver]
    result = subprocess.run(command, input=payload, env=env, capture_output=True, check=False)
    text = result.stderr.decode(errors="replace")
    return [float(x) for x in text.strip().splitlines()[-1].split()], text


def breakdown(runs: int, payload: bytes, up_env: dict[str, str], down_env: dict[str, str]) -> list[str]:
    """The report's lines: the budget and the hook's parts (ms, medians of `runs`)."""
    bare = ["/bin/sh", "-c", f"exec {sys.executable} -c pass"]
    no_site = ["/bin/sh", "-c", f"exec {sys.executable} -IS -c pass"]
    budget, modules, loaded, run_down, run_up, wall_up = [], [], [], [], [], []
    for _ in range(runs):
        budget.append(_cpu(bare, down_env) - _cpu(no_site, down_env))
        (m, w, r, _), _ = _parts(payload, down_env)
        modules.append(m)
        loaded.append(w)
        run_down.append(r)
        (m, w, r, wall), _ = _parts(payload, up_env)
        modules.append(m)
        loaded.append(w)
        run_up.append(r)
        wall_up.append(wall)
    start_up = subprocess.run(
        [sys.executable, "-IS", "-X", "importtime", "-c", "pass"], capture_output=True, check=False
    ).stderr.decode(errors="replace")
    interpreters = {line.rsplit("|", 1)[-1].strip() for line in start_up.splitlines()}
    own: dict[str, list[float]] = {}
    for _ in range(runs):
        _, text = _parts(payload, down_env, importtime=True)
        for line in text.splitlines():
            if line.startswith("import time:") and "|" in line and "self [us]" not in line:
                self_us, _, name = (part.strip() for part in line[len("import time:") :].split("|"))
                if name not in interpreters:  # loaded by the interpreter itself at start-up
                    own.setdefault(name, []).append(float(self_us) / 1000)

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:.2f} ms"

    shares = sorted(((statistics.median(v), k) for k, v in own.items()), reverse=True)
    return [
        f"Where the hook's CPU time goes ({runs} fresh interpreters each, medians):",
        f"  budget: `python -c pass` minus `python -IS -c pass` (site and its exit)   {ms(budget)}",
        f"  the hook's modules (agentwatch.emitter.hook and its imports)             {ms(modules)}",
        f"  the wire client, _socket and the session counters                        {ms(loaded)}",
        f"  the run, bus down (spooled)                                              {ms(run_down)}",
        f"  the run, bus up (until it leaves the acks to its child)                  {ms(run_up)}"
        f" ({ms(wall_up)} wall)",
        "  own import time under -X importtime (ms): "
        + ", ".join(f"{name} {value:.2f}" for value, name in shares[:16]),
    ]


def envs(data_dir: str, url: str) -> dict[str, str]:
    return dict(os.environ, AGENTWATCH_DATA_DIR=data_dir, AGENTWATCH_NATS_URL=url)
