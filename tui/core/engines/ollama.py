"""Ollama: no Prometheus metrics; its options and environment for the knobs."""

from tui.core.engines.engine import Engine, Knobs

OLLAMA = Engine(
    name="ollama",
    title="Ollama",
    knobs=Knobs(
        kv_room="lower num_ctx (each of the OLLAMA_NUM_PARALLEL slots holds that much KV)",
        more_slots="raise OLLAMA_NUM_PARALLEL",
        prefix_cache="keep its start identical (Ollama reuses a slot's cached prefix)",
        prefill_batch="the num_batch option",
        offload_check="check `ollama ps` says 100% GPU (not split with the CPU)",
        threads="the num_thread option",
        weights="a smaller quant tag, e.g. :q4_K_M",
        kv_dtype="OLLAMA_KV_CACHE_TYPE=q8_0 with OLLAMA_FLASH_ATTENTION=1",
    ),
)
