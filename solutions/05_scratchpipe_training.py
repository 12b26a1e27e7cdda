"""Solutions to notebook 05's exercises, as a learner might write them (see 01's file)."""


def hybrid_transfer_seconds(config, hw):
    pooled = config.data.batch_size * len(config.data.table_sizes) * config.model.dim * 4
    return 2 * pooled / hw.pcie_bw + 2 * hw.pcie_latency


def pipeline_step_seconds(stage_seconds, host_cores):
    host = [stage_seconds[s] for s in ("plan", "collect", "write_back")]
    return max(max(host), sum(host) / host_cores, stage_seconds["transfer"],
               stage_seconds["insert"] + stage_seconds["train"])
