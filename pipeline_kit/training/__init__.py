"""Training: data preparation (`kit prepare_sft_data`, `kit prepare_rl_data`: data.py; DPO's pairs: pairs.py), the
trainers that `kit sft/grpo/dpo` jobs run (TRL: trl_train.py; NeMo-RL: nemo_rl_job.py) and their backends."""

# `--backend` name -> its TrainingBackend (backends.py), imported only when asked for; a user's own is module:Class
BACKENDS: dict[str, str] = {
    "trl": "pipeline_kit.training.trl_backend:TrlBackend",
    "nemo_rl": "pipeline_kit.training.nemo_rl:NemoRlBackend",
}
