"""At the node limit, loading and the first evaluate() stay bounded (issue 23): a tampered artifact
with one formula as wide as `MAX_NODES` allows took 1.5 s and 330 MiB for its first evaluate()
at 200,000 nodes; the limit is now 100,000. Measured as resident-memory growth in a fresh process
(tracemalloc slows `compile()` a hundredfold on a formula this wide); bench/load.py times it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from artifact.limits import MAX_NODES

from .builders import P, int_param, one_stage, op

ROOT = Path(__file__).resolve().parents[2]

MEASURE = """
import resource, sys
sys.path.insert(0, {root!r})
from runtime import load_formulas
text = open({path!r}).read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
pipeline = load_formulas(text)["p"]
loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
value = pipeline.evaluate(n=5)["S"].memory
used = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(value, (loaded - before) // 1024, (used - loaded) // 1024)
"""


def test_one_formula_at_the_node_limit_loads_and_first_evaluates_within_128_mib(tmp_path):
    terms = [op("add", P("n"), {"k": "int", "v": j}) for j in range((MAX_NODES - 4) // 3)]
    doc = one_stage(memory=op("max", *terms))
    doc["pipelines"][0]["params"] = [int_param("n", 5, 0, 1000)]
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(doc))
    out = subprocess.run(
        [sys.executable, "-c", MEASURE.format(root=str(ROOT), path=str(path))],
        capture_output=True,
        text=True,
        check=True,
    )
    value, load_mib, first_mib = (int(x) for x in out.stdout.split())
    assert value == 5 + len(terms) - 1
    assert load_mib + first_mib < 128  # 170 MiB at the former 200,000-node limit
