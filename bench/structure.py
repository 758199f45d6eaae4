"""The structure counts per package (issue 42): `Any` in annotations, string comparisons against
an enum's values, functions over 60 lines, modules over 500 lines, import circles between
sub-packages. The counting is ``tests/structure.py``'s, the one `tests/test_structure.py`
ratchets; ``--root`` counts another checkout (a before/after table), ``--detail`` lists each.

    .venv/bin/python bench/structure.py [--root PATH] [--detail]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.structure import (
    PACKAGES,
    counts,
    enum_string_comparisons,
    enum_values,
    long_functions,
    long_modules,
    sources,
    subpackage_circles,
    table,
)


def detail(root: Path) -> list[str]:
    """Each long function and module, circle, and enum-string comparison, by package."""
    values = enum_values(tree for p in PACKAGES for _, tree in sources(root / p))
    out = []
    for p in PACKAGES:
        out += [f"{p}: function {f}" for f in long_functions(root / p)]
        out += [f"{p}: module {m} ({n} lines)" for m, n in long_modules(root / p).items()]
        out += [f"{p}: circle {' <-> '.join(c)}" for c in subpackage_circles(p, root)]
        for path, tree in sources(root / p):
            where = path.relative_to(root).as_posix()
            out += [f"{p}: enum string {where}:{n}" for n in enum_string_comparisons(tree, values)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--detail", action="store_true", help="list each counted place")
    args = parser.parse_args()
    root = args.root.resolve()
    print(f"structure of {root}")
    print(table(counts(root)))
    if args.detail:
        print("\n".join(detail(root)))


if __name__ == "__main__":
    main()
