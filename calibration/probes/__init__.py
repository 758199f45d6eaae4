"""Which sizes to measure and what they say: the probe policy, candidate sizes, the time probe,
probe minimums and the findings of the sizes against the formulas."""
