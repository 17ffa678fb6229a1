"""docs/plugins.md documents the connector contract (tclose.connector) from the code: every
Protocol's members, signatures and first docstring paragraphs, nothing more, nothing less."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path

from tclose import connector
from tclose.connector import OPTIONAL, REQUIRED, Capabilities, protocol_members

DOCS = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"


def _plain(text: str) -> str:
    """reST markup as Markdown, on one line."""
    text = re.sub(r":(?:class|meth|func|mod|data|attr):`~?([^`]+)`", r"`\1`", text)
    return " ".join(text.replace("``", "`").split())


def _first_paragraph(doc: str | None) -> str:
    return _plain(inspect.cleandoc(doc or "").split("\n\n")[0])


def _attributes(doc: str | None) -> dict[str, str]:
    """``name: text`` entries of a docstring's ``Attributes:`` section."""
    lines = inspect.cleandoc(doc or "").split("\n")
    if "Attributes:" not in lines:
        return {}
    entries: dict[str, str] = {}
    name = None
    for line in lines[lines.index("Attributes:") + 1 :]:
        found = re.match(r"    (\w+): (.*)", line)
        if found:
            name = found.group(1)
            entries[name] = found.group(2)
        elif line.startswith("        ") and name:
            entries[name] += " " + line.strip()
        else:
            break
    return {k: _plain(v) for k, v in entries.items()}


def _row(protocol: type, name: str) -> str:
    member = inspect.getattr_static(protocol, name, None)
    if callable(member) and not isinstance(member, property):
        signature = inspect.signature(member)
        parameters = [
            p.replace(annotation=inspect.Parameter.empty)
            for p in signature.parameters.values()
            if p.name != "self"
        ]
        plain = signature.replace(parameters=parameters, return_annotation=inspect.Signature.empty)
        return f"| `{name}{plain}` | {_first_paragraph(member.__doc__)} |"
    return f"| `{name}` | {_attributes(protocol.__doc__).get(name, '')} |"


def connector_reference() -> str:
    """The reference block docs/plugins.md must hold, generated from tclose.connector."""
    blocks = []
    for kind, protocols in (("required", REQUIRED), ("optional", OPTIONAL)):
        for name, protocol in protocols.items():
            rows = "\n".join(_row(protocol, m) for m in protocol_members(protocol))
            blocks.append(
                f"#### `{name}` ({kind})\n\n{_first_paragraph(protocol.__doc__)}\n\n"
                f"| Member | |\n|---|---|\n{rows}\n"
            )
    return "\n".join(blocks)


def field_docstrings(cls: type) -> dict[str, str]:
    """The docstring under each field of the dataclass ``cls`` (a string after its line)."""
    tree = ast.parse(inspect.getsource(inspect.getmodule(cls)))
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
    found = {}
    for field, after in zip(body.body, body.body[1:]):
        named = isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
        if named and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            found[field.target.id] = inspect.cleandoc(after.value.value)
    return found


def capabilities_reference() -> str:
    """The table of :class:`tclose.connector.Capabilities` docs/plugins.md must hold."""
    docs = field_docstrings(Capabilities)
    rows = "\n".join(
        f"| `{f.name}` | `{f.default!r}` | {_plain(docs.get(f.name, ''))} |"
        for f in dataclasses.fields(Capabilities)
    )
    return (
        f"#### `Capabilities`\n\n{_first_paragraph(Capabilities.__doc__)}\n\n"
        f"| Flag | Default | |\n|---|---|---|\n{rows}\n"
    )


def test_every_capability_has_a_docstring_and_the_docs_list_them():
    docs = field_docstrings(Capabilities)
    assert sorted(docs) == sorted(f.name for f in dataclasses.fields(Capabilities))
    assert all(docs.values())
    expected = capabilities_reference()
    assert expected in DOCS.read_text(encoding="utf-8"), (
        "docs/plugins.md lacks (or has an old copy of) the capabilities table; regenerate it "
        "with tests/test_connector_docs.py:capabilities_reference():\n" + expected
    )
    assert connector.PROMISED.keys() <= docs.keys()


def test_docs_plugins_md_holds_the_connector_reference_generated_from_the_code():
    docs = DOCS.read_text(encoding="utf-8")
    expected = connector_reference()
    assert expected in docs, (
        "docs/plugins.md lacks (or has an old copy of) the connector reference; regenerate it "
        "with tests/test_connector_docs.py:connector_reference():\n" + expected
    )


def test_every_protocol_member_is_documented_and_no_other():
    docs = DOCS.read_text(encoding="utf-8")
    for name, protocol in {**REQUIRED, **OPTIONAL}.items():
        section = docs.split(f"#### `{name}` (", 1)[1].split("\n####", 1)[0].split("\n### ", 1)[0]
        listed = re.findall(r"^\| `(\w+)", section, flags=re.MULTILINE)
        assert listed == protocol_members(protocol), name


def test_docs_name_no_connector_method_that_does_not_exist():
    docs = DOCS.read_text(encoding="utf-8")
    for gone in ("write_joined", "write_streamed", "drop_if_exists"):
        assert gone not in docs
