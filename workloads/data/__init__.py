"""Bundled workload traces (Mooncake FAST'25, Azure LLM inference 2023); see NOTICE."""
