"""Fail on any string literal equal to a sample field name in the package sources outside rl_core/schema.py.

Every layer must name a sample's tensors through `rl_core.schema`'s constants (issue 21). The field names
are read from schema.py's source (module-level `NAME = "literal"` assignments), so this runs without
torch, in `nox -s lint`. Sources are parsed with `ast`, which decides deliberately what counts:

- a string constant equal to a field name is a finding (dict keys, subscripts, tuples, calls, annotations);
- docstrings are skipped: prose may name a field;
- the literal text of f-strings is skipped: it is message text, never a key (`f"no {name!r}"` is fine);
- comments are not string literals, so never seen;
- a line ending in `# not-a-sample-field: <reason>` is skipped: the string names something else that happens
  to share the spelling (a tokenizer's output key, an HTTP protocol's field, a metric's stage); the reason
  is required.

Only package sources (`packages/*/src`) are checked. Tests keep the literal names on purpose: they pin the wire
names other processes, checkpoints and configs see, so renaming a constant fails them instead of passing silently.

Usage: `python tools/check_sample_fields.py [ROOT]` (ROOT defaults to the repository root); exits 1 with one
`path:line:col: message` per finding.
"""

from __future__ import annotations

import ast
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = Path("packages/rl-core/src/rl_core/schema.py")
PRAGMA = "# not-a-sample-field:"


def field_names(schema_source: str) -> frozenset[str]:
    """The sample field names: the string values of schema.py's module-level UPPER_CASE assignments."""
    names = set()
    for node in ast.parse(schema_source).body:
        if isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        elif isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        else:
            continue
        if (
            isinstance(value, ast.Constant)
            and isinstance(value.value, str)
            and all(isinstance(t, ast.Name) and t.id.isupper() for t in targets)
        ):
            names.add(value.value)
    return frozenset(names)


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the Constant nodes that are docstrings (first statement of a module, class or function)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
        # An attribute docstring: a bare string right after an assignment.
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for before, after in itertools.pairwise(body):
                if (
                    isinstance(before, (ast.Assign, ast.AnnAssign))
                    and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant)
                ):
                    found.add(id(after.value))
    return found


def _fstring_parts(tree: ast.Module) -> set[int]:
    return {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}


def findings(source: str, names: frozenset[str]) -> Iterator[tuple[int, int, str]]:
    """(line, column, field name) of every string literal in `source` that equals a field name."""
    tree = ast.parse(source)
    skipped = _docstrings(tree) | _fstring_parts(tree)
    lines = source.splitlines()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names):
            continue
        if id(node) in skipped:
            continue
        line = lines[node.lineno - 1]
        if PRAGMA in line and line.split(PRAGMA, 1)[1].strip():
            continue
        yield node.lineno, node.col_offset, node.value


def check(root: Path) -> list[str]:
    """One message per finding under root/packages/*/src."""
    names = field_names((root / SCHEMA).read_text())
    if not names:
        return [f"{SCHEMA}: no field names found (module-level NAME = 'literal' assignments)"]
    messages = []
    for path in sorted(root.glob("packages/*/src/**/*.py")):
        relative = path.relative_to(root).as_posix()
        if relative == SCHEMA.as_posix():
            continue
        found = findings(path.read_text(), names)
        messages += [
            f"{relative}:{line}:{col}: string literal {name!r} is a sample field name; use rl_core.schema."
            f"{name.upper()} (or end the line with '{PRAGMA} <reason>' if it names something else)"
            for line, col, name in found
        ]
    return messages


def main(argv: list[str]) -> int:
    """Print the findings under the given root (default: the repository); 1 if there are any."""
    root = Path(argv[1]) if len(argv) > 1 else ROOT
    messages = check(root)
    for message in messages:
        print(message)
    if messages:
        print(f"check_sample_fields: {len(messages)} finding(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
