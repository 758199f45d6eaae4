"""The names the `dslc` commands' plumbing had in one module, for the packages that add commands
(calibration's `calibrate`, `plan`, `infer`) and their tests. Each lives in the module of its
concern: `cli_ui` (streams, `--quiet`), `cli_failures` (exit 1 and 3), `cli_values` (NAME=VALUE),
`cli_files` (paths, discovery, writes), `cli_compile` (compile and report, load a book),
`cli_group` (the command group and its plugins); new code imports from those.
"""

from __future__ import annotations

from dslc.cli_compile import compile_files, load_book, pipeline_named, summary
from dslc.cli_failures import Failure, cannot, internal_error, runtime_errors
from dslc.cli_files import PATHS, REPO_FORMULAS, default_formulas, wf_files, write_file
from dslc.cli_group import PLUGIN_GROUP, DslcGroup, plugin_commands
from dslc.cli_ui import Ui, examples, ui
from dslc.cli_values import POINT_METAVAR, assignments, parse_value

__all__ = [
    "PATHS",
    "PLUGIN_GROUP",
    "POINT_METAVAR",
    "REPO_FORMULAS",
    "DslcGroup",
    "Failure",
    "Ui",
    "assignments",
    "cannot",
    "compile_files",
    "default_formulas",
    "examples",
    "internal_error",
    "load_book",
    "parse_value",
    "pipeline_named",
    "plugin_commands",
    "runtime_errors",
    "summary",
    "ui",
    "wf_files",
    "write_file",
]
