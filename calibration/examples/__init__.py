"""Built-in example pipelines: real diffusers pipelines from tiny configs with random weights."""
