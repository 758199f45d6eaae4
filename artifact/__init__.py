"""The artifact contract shared by the compiler and the runtime: limits, the error types, strict
JSON, the expression-tree checks and cost model, the frozen declarations and the document reader.

Neither side owns it: ``dslc`` writes what it describes, ``runtime`` loads it; it imports neither.
"""
