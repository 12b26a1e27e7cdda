"""The cost model's projections: a design's step counted once, priced on a machine by name (this machine's calibration or a GPU server) and combined."""
