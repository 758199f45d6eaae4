"""Runtime for compiled workload formulas: what the serving worker imports (no lark, sympy or
torch).

`runtime.measure` (which uses torch) is deliberately not imported here, nor are `runtime.record`
and `runtime.estimate` (pure Python, imported by those who record or estimate).
"""

from artifact.errors import (
    ArtifactError,
    ArtifactLimitError,
    EvaluationError,
    FormulaError,
    InadmissibleError,
    ParamError,
    ParamLimitError,
    ParamTypeError,
    UnknownParamError,
    UnknownPipelineError,
    UnknownStageError,
)
from artifact.ir import ComponentUse
from runtime.book import FormulaBook, load_formulas
from runtime.errors import RecordFormatError, RecordMismatchError, RuntimeValueError
from runtime.formulas import ParamInfo, Pipeline, StageValues

__all__ = [
    "ArtifactError",
    "ArtifactLimitError",
    "ComponentUse",
    "EvaluationError",
    "FormulaBook",
    "FormulaError",
    "InadmissibleError",
    "ParamError",
    "ParamInfo",
    "ParamLimitError",
    "ParamTypeError",
    "Pipeline",
    "RecordFormatError",
    "RecordMismatchError",
    "RuntimeValueError",
    "StageValues",
    "UnknownParamError",
    "UnknownPipelineError",
    "UnknownStageError",
    "load_formulas",
]
