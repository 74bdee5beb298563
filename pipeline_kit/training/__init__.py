"""Training: data preparation now (`kit prepare_sft_data`, `kit prepare_rl_data`, in pipeline_kit.training.data);
the TRL and NeMo-RL trainer backends come later."""
