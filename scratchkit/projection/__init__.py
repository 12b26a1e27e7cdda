"""The cost model's projections: a step's counted work priced on a hardware profile by name, this machine's calibration or a GPU server."""
