"""The calibrate job: warm up, probe, settle and verify a pipeline, then the verdict and its report
(`dslc calibrate`'s body, ``pipeline.calibrate_pipeline``)."""
