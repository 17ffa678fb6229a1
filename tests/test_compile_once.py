"""No surprise compilation: every compiled kernel is compiled for its one declared
signature, once per environment, whatever the caller hands the public kernel functions.

The kernels are called first with ordinary arrays (compiled, or loaded from the cache), then with
inputs of other kinds: read-only, non-contiguous, other dtypes. Those calls must give the same
results and compile nothing: a kernel compiled for a new type signature would be compiled again
by the first run that hands it such an input, for seconds, after the environment's first run.
"""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import pytest

import tclose.kernels as kernels
from tclose.base.compile_notice import compile_notice
from tclose.base.jit import LazyKernel, dispatcher_of
from tclose.kernels.emd import OrderedEMD
from tclose.kernels.k_first import k_first
from tclose.kernels.mdav import mdav
from tclose.kernels.merge import merge_until_t_close
from tclose.kernels.nominal import NominalEMD
from tclose.kernels.refine import refine
from tclose.kernels.t_first import t_first
from tclose.measures import linkage_contributions

KERNEL_MODULES = [
    *(f"{kernels.__name__}.{info.name}" for info in pkgutil.iter_modules(kernels.__path__)),
    "tclose.measures._linkage",
]


def _read_only(array: np.ndarray) -> np.ndarray:
    array = array.copy()
    array.flags.writeable = False
    return array


def _variants(x: np.ndarray) -> list[np.ndarray]:
    """``x`` (whole numbers) as other kinds of array holding the same values."""
    strided = np.empty((x.shape[0], 2 * x.shape[1]))[:, ::2]
    strided[:] = x
    return [
        _read_only(x),
        strided,
        np.asfortranarray(x),
        x.astype(np.float32),
        x.astype(np.int32),
        _read_only(x.astype(np.int64)),
    ]


@pytest.fixture(scope="module")
def table():
    """QIs of whole numbers (with ties), an ordered and a nominal confidential attribute (500
    rows: above t-first's NumPy twin's threshold, so that every kernel below is compiled)."""
    rng = np.random.default_rng(29)
    n = 500
    x = np.round(rng.normal(size=(n, 3)) * 4)  # whole numbers, with ties
    ordered = OrderedEMD.fit(np.round(rng.lognormal(size=n), 1))
    nominal = NominalEMD.fit(np.array([f"v{v}" for v in rng.integers(0, 5, n)]))
    return x, [ordered, nominal]


def _calls(table):
    """Each public kernel function as a function of its QI matrix (the other inputs fixed)."""
    x, distances = table
    ordered = distances[0]
    base = merge_until_t_close(x, mdav(x, 4), distances, 0.3)[0]
    return {
        "t_first": lambda qi: t_first(qi, ordered.ranks, 4, 0.2)[0],
        "mdav": lambda qi: mdav(qi, 4),
        "mdav sdcmicro": lambda qi: mdav(qi, 3, ties="sdcmicro"),
        "merge": lambda qi: merge_until_t_close(qi, mdav(qi, 4), distances, 0.3)[0],
        "merge gain": lambda qi: merge_until_t_close(
            qi, mdav(qi, 4), distances, 0.3, partner="gain", candidates=3
        )[0],
        "k_first": lambda qi: k_first(qi, distances, 3, 0.3),
        "refine": lambda qi: refine(qi, base, distances, 4, 0.3, passes=2)[0],
        "linkage": lambda qi: linkage_contributions(qi, np.round(qi, 1)),
    }


@pytest.mark.parametrize(
    "name",
    ["t_first", "mdav", "mdav sdcmicro", "merge", "merge gain", "k_first", "refine", "linkage"],
)
def test_other_kinds_of_input_compile_nothing(table, name, monkeypatch):
    import tclose.measures

    monkeypatch.setattr(tclose.measures, "KERNEL_MIN_ROWS", 0)  # the compiled linkage search
    x, _ = table
    call = _calls(table)[name]
    expected = call(x)  # compiled or loaded from the cache here
    for variant in _variants(x):
        with compile_notice() as watch:
            got = call(variant)
        np.testing.assert_array_equal(got, expected)
        assert watch.kernels == 0, (name, variant.flags, variant.dtype)
    # Nor loaded a second signature from the cache (which a run with a fresh cache compiles).
    assert {k: len(d.signatures) for k, d in _made_kernels() if len(d.signatures) != 1} == {}


def test_every_kernel_made_has_its_one_signature(table):
    """After the calls above (and whatever ran before in this process), no kernel of the kernel
    modules holds a second signature, nor could compile one."""
    for name in ("t_first", "mdav", "merge", "k_first", "refine", "linkage"):
        _calls(table)[name](table[0])
    made = dict(_made_kernels())
    assert len(made) >= 10
    for name, dispatcher in made.items():
        assert len(dispatcher.signatures) == 1, name
        assert not dispatcher._can_compile, name


def _made_kernels():
    """``(name, dispatcher)`` of every kernel of the kernel modules made so far (not those
    that Numba inlines into their callers)."""
    for module_name in KERNEL_MODULES:
        module = importlib.import_module(module_name)
        for value in vars(module).values():
            if isinstance(value, LazyKernel) or not hasattr(value, "py_func"):
                continue
            if value.py_func.__module__ != module_name:
                continue
            dispatcher = dispatcher_of(value)
            if dispatcher.targetoptions.get("inline") != "always":
                yield f"{module_name}.{value.py_func.__qualname__}", dispatcher


def _fresh_kernel():
    """A function Numba compiles on its first call in this process (no cache)."""
    from numba import njit

    @njit
    def total(values):
        result = 0.0
        for v in values:
            result += v
        return result

    return total


def test_a_phase_leaves_its_compilation_to_timings_compile():
    import time

    from tclose.core.pipeline import Timer

    timer = Timer()
    started = time.perf_counter()
    with timer.phase("kernel"), compile_notice() as watch:
        _fresh_kernel()(np.arange(3.0))
    wall = time.perf_counter() - started
    with timer.phase("verify"):
        pass
    assert watch.kernels == 1 and watch.seconds > 0
    assert timer.seconds["compile"] == pytest.approx(watch.seconds, abs=1e-3)
    assert timer.seconds["kernel"] + timer.seconds["compile"] == pytest.approx(wall, abs=0.01)
    assert timer.seconds["kernel"] < wall - watch.seconds / 2
    timer.record("measures", 1.0, after="kernel", compiling=0.25)
    assert timer.seconds["measures"] == 0.75
    assert timer.seconds["compile"] == pytest.approx(watch.seconds + 0.25, abs=1e-3)


def test_a_compilation_in_another_thread_is_not_this_phase_s():
    """The background measures compile in their own thread, beside the write: their notice
    counts for them (``_compile_accounted``), never for the phase the main thread is in."""
    import threading

    from tclose.core.pipeline import Timer
    from tclose.core.runner import _compile_accounted

    timer = Timer()
    results = []

    def measures():
        with compile_notice():
            _fresh_kernel()(np.arange(4.0))
        return "measured"

    with timer.phase("write"):
        thread = threading.Thread(target=lambda: results.append(_compile_accounted(measures)))
        thread.start()
        thread.join(timeout=300)
    assert not thread.is_alive()
    [(value, compiling)] = results
    assert value == "measured" and compiling > 0
    assert timer.seconds.get("compile", 0.0) == 0.0


def test_the_report_and_the_summary_show_compile_apart():
    import pandas as pd

    import tclose
    from tclose.app.cli import _summary
    from tclose.core.report_checks import report_problem

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"age": rng.integers(20, 80, 60), "charge": rng.normal(size=60)})
    report = tclose.anonymize(frame, ["age"], ["charge"], k=3, t=0.5).report
    timings = report["timings"]
    assert list(timings)[-2:] == ["compile", "total"]
    assert timings["compile"] == 0.0  # 60 rows: the NumPy twins, nothing compiled
    assert "compiling:" not in _summary(report, 1.0)
    compiled = {**report, "timings": {**timings, "compile": 2.5}}
    lines = _summary(compiled, 3.0).splitlines()
    assert lines[-1].startswith("compiling: 2.50 s of it") and "once" in lines[-1]
    # A report read back (tclose report, verify --report) holds a number there.
    assert report_problem(report) is None
    for broken in (None, "2.5"):
        problem = report_problem({**report, "timings": {**timings, "compile": broken}})
        assert problem is not None and problem.startswith("timings.compile is")
