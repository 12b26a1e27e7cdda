"""The cost model's projections: a step's counted work priced on a machine by name, this machine's calibration or a GPU server."""
