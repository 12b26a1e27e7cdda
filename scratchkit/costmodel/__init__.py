"""The cost model's inputs: a training step's work counted stage by stage, and the machines (this machine's type, the GPU servers) whose speeds price it."""
