"""Tiny diffusers pipelines (random weights, nothing downloaded) of the shipped formula families
that calibration/examples does not build: factories for `dslc calibrate --pipeline FILE:build`."""
