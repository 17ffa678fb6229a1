"""Value hierarchies (taxonomies) of nominal attributes.

A hierarchy is a tree whose leaves are the values that may occur in the data. It can be given in
YAML as a nested mapping (a list holds leaves and mappings of subtrees; ``null`` marks a leaf)::

    hierarchy:
      Any:
        Circulatory: [I20, I21, I50]
        Respiratory: {Infections: [J10, J18], Chronic: [J44, J45]}

or as a CSV file of paths, one leaf per line from the leaf to the most general value, like ARX's
hierarchy files (``;`` or ``,`` separated)::

    I20;Circulatory;Any
    J10;Infections;Respiratory;Any

Heights: a node's depth is its distance from the root; ``H`` is the largest leaf depth. The ground
distance between two leaves is ``(H - depth(LCA)) / H`` (Li et al.'s hierarchical distance: the
height of their lowest common ancestor over the height of the tree, for trees whose leaves all
have depth ``H``).
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tclose.base.atomic import read_text
from tclose.errors import ConfigError, DataError


@dataclass
class Hierarchy:
    """A rooted tree of values.

    Attributes:
        root: the root's name.
        children: node → its children, in the order given.
        parent: node → its parent (``None`` for the root).
        leaves: the leaves in depth-first order (siblings in the order given).
        depth: node → distance from the root.
    """

    root: str
    children: dict[str, list[str]]
    parent: dict[str, str | None] = field(default_factory=dict)
    leaves: list[str] = field(default_factory=list)
    depth: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.parent = {self.root: None}
        self.depth = {self.root: 0}
        self.leaves = []
        stack = [self.root]
        while stack:
            node = stack.pop()
            kids = self.children.get(node, [])
            if not kids:
                self.leaves.append(node)
            for child in reversed(kids):
                if child in self.parent:
                    raise ConfigError(f"Hierarchy value {child!r} appears twice in the tree.")
                self.parent[child] = node
                self.depth[child] = self.depth[node] + 1
                stack.append(child)

    @property
    def height(self) -> int:
        """``H``: the largest leaf depth (at least 1 so that distances stay defined)."""
        return max(1, max(self.depth[leaf] for leaf in self.leaves))

    @classmethod
    def from_mapping(
        cls, mapping: Mapping[str, Any], path: Sequence[str] = ("hierarchy",)
    ) -> Hierarchy:
        """Build from a nested mapping with exactly one top-level key (the root); ``path``: its
        key path in the configuration, where an error is placed."""
        if not isinstance(mapping, Mapping) or len(mapping) != 1:
            raise ConfigError(
                "A hierarchy is a mapping with exactly one root "
                "key, e.g. {Any: {Europe: [Spain, France]}}.",
                path=path,
            )
        children: dict[str, list[str]] = {}

        def walk(node: str, body: Any) -> None:
            if body is None:
                return
            if isinstance(body, Mapping):
                kids = list(body.items())
            elif isinstance(body, (list, tuple)):
                kids = []
                for item in body:
                    if isinstance(item, Mapping):  # every key of a mapping item is a child
                        kids += list(item.items())
                    elif isinstance(item, (list, tuple)):
                        raise ConfigError(
                            f"Under {node!r}: a list holds values and mappings of "
                            f"subtrees ({{Europe: [Spain, France]}}), not lists.",
                            path=path,
                        )
                    else:
                        kids.append((item, None))
            else:
                raise ConfigError(
                    f"Under {node!r}: expected a mapping, a list or nothing, got {body!r}.",
                    path=path,
                )
            children[node] = [str(name) for name, _ in kids]
            for name, sub in kids:
                walk(str(name), sub)

        ((root, body),) = mapping.items()
        walk(str(root), body)
        return cls(str(root), children)

    @classmethod
    def from_csv(cls, file: str | Path) -> Hierarchy:
        """Build from a CSV of leaf-to-root paths; a missing common root is added as ``*``.

        The file is UTF-8 text (a byte order mark is skipped). Blank lines are skipped, cells
        are stripped of surrounding spaces, and empty cells at the end of a line (a spreadsheet
        pads shorter lines so) are dropped; an empty cell before the line's last value is a
        :class:`ConfigError` naming the line."""
        try:
            text = read_text(file, encoding="utf-8-sig")
        except OSError as error:
            raise ConfigError(f"Cannot read the hierarchy file {file}: {error.strerror}.") from None
        except UnicodeDecodeError as error:
            raise ConfigError(
                f"The hierarchy file {file} is not UTF-8 text (byte {error.start + 1} is not "
                f"UTF-8): give a CSV file of leaf-to-root paths, saved as UTF-8."
            ) from None
        delimiter = ";" if text.count(";") >= text.count(",") else ","
        paths: list[list[str]] = []
        lines: list[int] = []
        reader = csv.reader(text.splitlines(), delimiter=delimiter)
        for row in reader:
            line = reader.line_num
            cells = [cell.strip() for cell in row]
            while cells and not cells[-1]:
                cells.pop()
            if not cells:
                continue
            if "" in cells:
                raise ConfigError(
                    f"Hierarchy file {file}, line {line}: value {cells.index('') + 1} of the "
                    f"path is empty; every value from the leaf to the root must be named."
                )
            paths.append(cells)
            lines.append(line)
        if not paths:
            raise ConfigError(f"The hierarchy file {file} is empty.")
        tops = {p[-1] for p in paths}
        if len(tops) > 1:
            paths = [[*p, "*"] for p in paths]
        children: dict[str, list[str]] = {}
        parents: dict[str, str] = {}
        first_child_line: dict[str, int] = {}
        for line, row in zip(lines, paths):
            for child, parent in zip(row[:-1], row[1:]):
                if parents.setdefault(child, parent) != parent:
                    raise ConfigError(
                        f"Hierarchy file {file}, line {line}: {child!r} has two "
                        f"parents ({parents[child]!r} and {parent!r})."
                    )
                siblings = children.setdefault(parent, [])
                first_child_line.setdefault(parent, line)
                if child not in siblings:
                    siblings.append(child)
        for line, row in zip(lines, paths):
            if len(row) > 1 and row[0] in children:
                raise ConfigError(
                    f"Hierarchy file {file}, line {line}: {row[0]!r} begins the line, so it "
                    f"is a leaf, but it is the parent of other values (line "
                    f"{first_child_line[row[0]]}). A value is either a leaf or an inner node."
                )
        return cls(paths[0][-1], children)

    @classmethod
    def load(
        cls, spec: Any, path: Sequence[str] = ("hierarchy",), base: Path | None = None
    ) -> Hierarchy:
        """From a YAML value: a nested mapping, or the path of a CSV file (relative to ``base``);
        ``path``: the value's key path in the configuration, where an error is placed."""
        if isinstance(spec, Hierarchy):
            return spec
        if isinstance(spec, str):
            file = Path(spec)
            if base is not None and not file.is_absolute():
                file = base / file
            return cls.from_csv(file)
        return cls.from_mapping(spec, path)

    def digest(self) -> str:
        """SHA-256 of the tree as canonical JSON (root, then every inner node's children in
        the order given): two hierarchies with the same digest give the same distances and
        leaf order, however they were written (YAML mapping or CSV file)."""
        inner = sorted(self.parent, key=lambda node: (self.depth[node], node))
        tree = [
            self.root,
            [[node, self.children[node]] for node in inner if self.children.get(node)],
        ]
        text = json.dumps(tree, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def with_leaf_under_root(self, leaf: str) -> Hierarchy:
        """A copy with ``leaf`` added as the root's last child: at ground distance 1 from every
        other leaf (the height stays the same)."""
        children = {node: list(kids) for node, kids in self.children.items()}
        children.setdefault(self.root, []).append(leaf)
        return Hierarchy(self.root, children)

    def check_values(self, values: Iterable[Any], column: str) -> None:
        """:class:`DataError` counting the data values that are not leaves of the hierarchy
        (never showing them: they are data)."""
        leaves = set(self.leaves)
        unknown = {str(v) for v in values} - leaves
        if unknown:
            raise DataError(
                f"Column {column!r}: {len(unknown)} distinct value(s) are not leaves of its "
                f"hierarchy (values are not shown). Add them to the hierarchy."
            )

    def ancestors(self, leaf: str) -> list[str]:
        """``leaf``'s ancestors from its parent up to the root."""
        out = []
        node = self.parent[leaf]
        while node is not None:
            out.append(node)
            node = self.parent[node]
        return out

    def leaf_distance_matrix(self, leaves: list[str]) -> np.ndarray:
        """Ground distances ``(H - depth(LCA)) / H`` between the given leaves."""
        height = self.height
        chains = [[leaf, *self.ancestors(leaf)] for leaf in leaves]
        sets = [set(chain) for chain in chains]
        size = len(leaves)
        out = np.zeros((size, size))
        for i in range(size):
            for j in range(i + 1, size):
                lca = next(node for node in chains[i] if node in sets[j])
                out[i, j] = out[j, i] = (height - self.depth[lca]) / height
        return out
