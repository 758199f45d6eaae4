"""Calibration: warm up any diffusers pipeline, extrapolate it through its formulas, plan placement.

Built on the runtime (``runtime.load_formulas``, ``runtime.measure``, ``runtime.estimate``); never
imported by the compiler or the runtime.
"""
