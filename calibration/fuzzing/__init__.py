"""Fuzzing the calibration commands: calibration documents and option lists (``mutate``), `dslc
infer`'s inputs (``infer``) and saved plans (``plan``); shared by bench/fuzz.py and the tests."""
