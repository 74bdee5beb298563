"""Training: data preparation (`kit prepare_sft_data`, `kit prepare_rl_data`: data.py) and the TRL trainer that
`kit sft` / `kit grpo` jobs run (trl_train.py, with its config, checkpoints and GRPO reward); NeMo-RL comes later."""
