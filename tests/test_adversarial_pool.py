"""Adversarial: the local process pool from stdin, from an unguarded script, and killed.

Workers must never re-run ``__main__`` (a script read from stdin has no file to re-run; an
unguarded script would run again in every worker), and must die with the driver: after a
SIGKILL of the driver no process of the run (worker, fork server, resource tracker) survives.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from waiting import wait_for  # noqa: E402

SCRIPT = """
import os, sys
import numpy as np, pandas as pd
import tclose
print("script started", flush=True)
rng = np.random.default_rng(0)
n = int(os.environ.get("ROWS", "4000"))
frame = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n),
                      "c": rng.integers(0, 50, n).astype(float)})
result = tclose.anonymize(frame, quasi_identifiers=["a", "b"], confidential=["c"], k=5, t=0.3,
                          algorithm="t-first", blocks=4, executor="local", workers=2)
print("rows", len(result.data), flush=True)
"""


def _env(marker: str) -> dict[str, str]:
    return {**os.environ, "TCLOSE_TEST_POOL_MARKER": marker}


def _processes_with(marker: str) -> list[int]:
    """Pids of live processes whose environment holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().split(") ", 1)[1][0]
        except OSError:
            continue
        if marker.encode() in environ and state != "Z":
            found.append(int(entry.name))
    return found


def test_the_pool_works_from_a_script_read_on_stdin():
    done = subprocess.run(
        [sys.executable, "-"],
        input=SCRIPT,
        capture_output=True,
        text=True,
        timeout=300,
        env=_env("stdin"),
    )
    assert done.returncode == 0, done.stderr
    assert "rows 4000" in done.stdout and "BrokenPipe" not in done.stderr


def test_the_pool_never_reruns_an_unguarded_script(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env("unguarded"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("script started") == 1
    assert "rows 4000" in done.stdout


NAP = """
import os, time
from pathlib import Path

def nap(shared, payload):
    Path({marks!r}, f"napping-{{os.getpid()}}").touch()
    time.sleep(120)
    return payload
"""

NAPPING = """
import sys, time
from tclose.blocks.executors import run_tasks
if __name__ == "__main__":  # guarded: the orphan test is about the kill, not about __main__
    sys.path.insert(0, sys.argv[1])
    import napping
    print(run_tasks(napping.nap, list(range(4)), executor="local", workers=2))
"""


def test_no_orphan_after_sigkill_of_the_driver(tmp_path):
    marker = f"pool-{secrets.token_hex(6)}"
    (tmp_path / "napping.py").write_text(NAP.format(marks=str(tmp_path)))
    script = tmp_path / "driver.py"
    script.write_text(NAPPING)
    driver = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path)],
        env=_env(marker),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )

    def napping() -> bool:
        assert driver.poll() is None, driver.communicate()
        naps = list(tmp_path.glob("napping-*"))
        return len(naps) >= 2 and len(_processes_with(marker)) >= 4

    try:  # the driver, its fork server and two workers, each in a task
        wait_for(napping, 120, "two workers napping")
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    deadline = time.monotonic() + 15
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _processes_with(marker)
    for pid in left:  # do not leave them to the rest of the suite
        os.kill(pid, signal.SIGKILL)
    assert left == [], "processes of the killed run survive"
