"""The layering holds: compiler -> artifact <- runtime <- calibration, no arrow back.

Every module of ``dslc`` is imported (the `dslc` command's plugins are not: they load only when
run), then every module of ``runtime`` outside ``runtime.measure``; what each pulled in is checked
in a fresh interpreter, so nothing imported by other tests hides an arrow.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SCRIPT = """
import importlib, json, pkgutil, sys
skip = set(sys.argv[2:])

def walk(name):
    module = importlib.import_module(name)
    for info in pkgutil.iter_modules(getattr(module, "__path__", []), name + "."):
        if info.name not in skip:
            walk(info.name)

walk(sys.argv[1])
roots = sorted({name.split(".")[0] for name in sys.modules})
print(json.dumps(roots))
"""


def _imported(package: str, *skip: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, package, *skip], capture_output=True, text=True, check=True
    )
    return set(json.loads(out.stdout))


def test_the_compiler_imports_neither_torch_nor_diffusers_nor_calibration():
    roots = _imported("dslc")
    assert {"torch", "diffusers", "transformers", "calibration"}.isdisjoint(roots), roots


def test_the_runtime_never_imports_the_compiler_or_calibration():
    roots = _imported("runtime", "runtime.measure")
    assert {"dslc", "lark", "sympy", "calibration", "torch"}.isdisjoint(roots), roots


@pytest.mark.slow
def test_measuring_uses_torch_but_never_the_compiler_or_calibration():
    roots = _imported("runtime")
    assert "torch" in roots
    assert {"dslc", "lark", "sympy", "calibration"}.isdisjoint(roots), roots


def test_calibration_plans_without_torch():
    roots = _imported("calibration.plan")
    assert "torch" not in roots, roots
