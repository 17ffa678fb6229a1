"""The audit report: what was done, with what, and what the verifier found.

The report holds counts, parameters, digests, timings and aggregate statistics only: never a data
value of an individual row, never a password (URLs are redacted).
"""

from __future__ import annotations

import json
import logging
import platform
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from . import __version__
from .encoding import information_loss
from .interfaces import EMD_TOLERANCE

if TYPE_CHECKING:
    from .config import Config
    from .interfaces import Partition
    from .registry import Registry
    from .runner import Resolved
    from .verify import Verification

log = logging.getLogger("tclose")

EMD_DEFINITION = (
    "EMD(P,Q) = 1/(m-1) * sum_i |sum_{j<=i} (p_j - q_j)| over the m distinct values of the "
    "attribute in the published table (ordered distance); a class passes when EMD <= t + "
    f"{EMD_TOLERANCE:g}"
)
SSE_DEFINITION = (
    "sse = 1/n * sum_rows 1/d * sum_QIs ((original - published) / std_original)^2 "
    "(the paper's normalized SSE, NED = difference over the attribute's standard deviation)"
)


def cluster_statistics(labels: np.ndarray) -> dict[str, Any]:
    """Count, min, mean, max and a size histogram of the clusters given by dense labels."""
    sizes = np.bincount(labels) if len(labels) else np.zeros(0, dtype=np.int64)
    values, counts = np.unique(sizes, return_counts=True)
    return {
        "count": int(len(sizes)),
        "min": int(sizes.min()) if len(sizes) else 0,
        "mean": float(sizes.mean()) if len(sizes) else 0.0,
        "max": int(sizes.max()) if len(sizes) else 0,
        "size_histogram": {str(int(v)): int(c) for v, c in zip(values, counts)},
    }


def build_report(
    config: Config | None,
    registry: Registry,
    resolved: Resolved,
    n: int,
    labels: np.ndarray,
    partition: Partition,
    verification: Verification | None,
    quasi: np.ndarray,
    replaced: dict[str, np.ndarray],
    timings: dict[str, float],
    started: float,
    *,
    published: bool,
    dry_run: bool = False,
    source_url: str | None = None,
    target_url: str | None = None,
    k: int | None = None,
    t: float | None = None,
) -> dict[str, Any]:
    """Assemble the audit report (the contract's fields and more)."""
    k = config.k if config is not None else k
    t = config.t if config is not None else t
    anonymized = np.column_stack(list(replaced.values())) if replaced else quasi
    used = [("algorithm", resolved.algorithm.name)]
    used += [("distance", d.name) for d, _ in resolved.distances.values()]
    report: dict[str, Any] = {
        "tool": {"name": "tclose", "version": __version__},
        "run": {
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "dry_run": dry_run,
            "published": published,
            "host": socket.gethostname(),
            "python": platform.python_version(),
            "platform": sys.platform,
        },
        "config_sha256": config.digest() if config is not None else None,
        "source": {"rows": n},
        "target": {"rows": n if verification is None else
                   next(c["actual"] for c in verification.checks if c["name"] == "row_count")},
        "algorithm": {"name": resolved.algorithm.name, "options": resolved.algorithm_options,
                      "info": partition.info},
        "privacy": {
            "k": k,
            "t": t,
            "k_achieved": verification.k_achieved if verification else None,
            "t_achieved": verification.t_achieved if verification else {},
            "distance": {c: d.name for c, (d, _) in resolved.distances.items()},
            "emd_definition": EMD_DEFINITION,
            "t_enforced": bool(resolved.algorithm.requires_t and t is not None),
        },
        "clusters": cluster_statistics(labels),
        "utility": {**information_loss(quasi, anonymized), "definition": SSE_DEFINITION},
        "verification": {
            "passed": bool(verification.passed) if verification else False,
            "checks": _jsonable(verification.checks) if verification else [],
        },
        "timings": timings,
        "plugins": registry.versions(used),
    }
    if config is not None:
        report["source"].update({"url": source_url, "table": config.source.table})
        report["target"].update({"url": target_url, "table": config.target.table})
        report["attributes"] = {name: {"role": a.role, "type": a.type}
                                for name, a in config.attributes.items()}
    return report


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def write_json(report: dict[str, Any], path: str | Path) -> None:
    """Write the report as indented JSON, creating parent folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_jsonable(report), indent=2, sort_keys=False) + "\n",
                    encoding="utf-8")


def finish(report: dict[str, Any], registry: Registry, config: Config,
           report_path: str | None) -> None:
    """Write the configured report files and call the ``run_finished`` hook."""
    path = report_path or config.report_json
    if path:
        write_json(report, path)
    if registry.manager is not None:
        try:
            registry.manager.hook.run_finished(report=report, config=config)
        except Exception as error:  # an audit sink must not change the outcome
            log.warning("a run_finished hook failed: %s", error)
