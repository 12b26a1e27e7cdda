"""Sharded training on torch.distributed: each rank owns a shard of the tables and runs its own trainer over it."""
