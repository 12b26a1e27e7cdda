"""Measuring the trainers: side-by-side benchmarks, the exactness check against plain PyTorch, the cost model's validation, the fault campaigns and the records they leave."""
