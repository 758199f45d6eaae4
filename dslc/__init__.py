"""dslc: the workload-formula compiler (parse, check, prove, emit the artifact)."""

__version__ = "0.3.0"
