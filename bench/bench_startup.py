"""Start-up cost of the ``tclose`` command: ``tclose plugins``, ``import tclose``, and a
100-row ``tclose run`` with a warm and with a cold Numba cache, against the budgets.

Usage: python bench/bench_startup.py [REPEATS] [--no-cold]   (default 5 repeats; prints medians)

Targets (warm Numba cache): ``tclose plugins`` <= 0.4 s CPU, a 100-row SQLite
``tclose run`` <= 1 s CPU. Each line prints the measured median, the budget and the ratio
(measured / budget: <= 1.00 meets it), with the median peak RSS.

Each figure is a fresh ``python -m tclose`` process; CPU is user + system time of that process
and RSS its peak (from ``os.wait4``; this script imports nothing heavy itself, as a forked child
starts with its parent's peak RSS). The load of other processes on the machine changes CPU time
less than wall time: quote both. The cold run points ``NUMBA_CACHE_DIR`` at an empty folder, so every kernel the run uses is
compiled (once; it takes tens of seconds on a loaded 2-core machine).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import yaml

PLUGINS_CPU_BUDGET = 0.4  # seconds of CPU, `tclose plugins`
RUN_CPU_BUDGET = 1.0  # seconds of CPU, a 100-row run with a warm cache

#: Libraries a run may import, each timed alone to show the floor it sets (numba.np.arraymath is
#: what Numba imports on its first cached kernel load; it imports scipy.linalg for BLAS). Each line
#: says whether the 100-row run imported it: it imports neither Numba nor SciPy.
COMPONENTS = (
    "import numpy",
    "import pandas",
    "import sqlalchemy",
    "import numba",
    "import numba.np.arraymath",
    "import scipy.spatial",
)


def measure(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS MB) of one child process running ``args``."""
    started = time.perf_counter()
    child = subprocess.Popen(
        args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {child.stderr.read()}")
    child.stderr.close()
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024


def medians(samples: list[tuple[float, float, int]]) -> tuple[float, float, int]:
    walls, cpus, rss = zip(*samples)
    return statistics.median(walls), statistics.median(cpus), int(statistics.median(rss))


def run_config(folder: Path) -> Path:
    """A 100-row demo table and the quickstart configuration (t-first, k=5, t=0.15) over it."""
    database = folder / "demo.db"
    make = (
        "from tclose.app.demo import create_demo_database as c; import sys; c(sys.argv[1], 100, 0)"
    )
    subprocess.run([sys.executable, "-c", make, str(database)], check=True)
    text = resources.files("tclose.configs").joinpath("quickstart.yaml").read_text("utf-8")
    document = yaml.safe_load(text)
    document["source"]["url"] = f"sqlite:///{database.as_posix()}"
    document["target"]["if_exists"] = "replace"
    document["report"] = {"json": (folder / "report.json").as_posix()}
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def modules_of_run(python: list[str], config: Path, env: dict[str, str]) -> set[str]:
    """The modules one 100-row run imports (the run in a fresh process, then ``sys.modules``)."""
    script = (
        "import contextlib, io, json, sys\n"
        "from tclose.app.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['run', {str(config)!r}, '-q'])\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([*python, "-c", script], env=env, capture_output=True, text=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def line(label: str, wall: float, cpu: float, rss: int, budget: str) -> None:
    print(f"{label:<34} wall {wall:6.3f} s  CPU {cpu:6.3f} s  RSS {rss:4d} MB  {budget}")


def main() -> None:
    repeats = int(next((a for a in sys.argv[1:] if a.isdigit()), 5))
    cold = "--no-cold" not in sys.argv
    python = [sys.executable]
    env = {**os.environ, "TCLOSE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    # The library lines below run `python -c`, not the tclose command: give them the command's
    # one BLAS thread (tclose/__main__.py), so that they add up to what the run pays.
    libraries_env = {"OPENBLAS_NUM_THREADS": "1", **env}
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"medians of {repeats} fresh processes; {os.cpu_count()} CPUs, load average {load}")
    print("third-party plugin autoload disabled (TCLOSE_DISABLE_PLUGIN_AUTOLOAD=1)\n")

    floor = medians([measure([*python, "-c", "pass"], env) for _ in range(repeats)])
    line("python -c pass (floor)", *floor, "")
    imported = medians([measure([*python, "-c", "import tclose"], env) for _ in range(repeats)])
    line("python -c 'import tclose'", *imported, "")
    plugins = medians([measure([*python, "-m", "tclose", "plugins"], env) for _ in range(repeats)])
    ratio = plugins[1] / PLUGINS_CPU_BUDGET
    line("tclose plugins", *plugins, f"budget {PLUGINS_CPU_BUDGET} s CPU: {ratio:.2f}x")

    with tempfile.TemporaryDirectory() as tmp:
        config = run_config(Path(tmp))
        command = [*python, "-m", "tclose", "run", str(config), "-q"]
        measure(command, env)  # warm the cache
        warm = medians([measure(command, env) for _ in range(repeats)])
        ratio = warm[1] / RUN_CPU_BUDGET
        line(
            "tclose run, 100 rows, warm cache",
            *warm,
            f"budget {RUN_CPU_BUDGET} s CPU: {ratio:.2f}x",
        )
        print(
            "\nwhere the warm run's CPU goes: each library alone (a fresh process, floor included,"
            " OPENBLAS_NUM_THREADS=1 as the command sets it)"
        )
        imported = modules_of_run(python, config, env)
        for library in COMPONENTS:
            alone = medians(
                [measure([*python, "-c", library], libraries_env) for _ in range(repeats)]
            )
            name = library.removeprefix("import ")
            line(f"  {library}", *alone, "" if name in imported else "(not imported by the run)")
        if cold:
            cache = Path(tmp) / "numba-cache"
            cold_run = measure(command, {**env, "NUMBA_CACHE_DIR": str(cache)})
            line("tclose run, 100 rows, cold cache", *cold_run, "(1 run: compiles the kernels)")
            print(f"\ncold / warm CPU: {cold_run[1] / warm[1]:.1f}x")


if __name__ == "__main__":
    main()
