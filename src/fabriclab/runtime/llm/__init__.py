"""The parallel transformer trainer: a small GPT-style decoder (dense or top-k MoE) trained with tensor,
pipeline, expert and (sharded) data parallelism over plain torch.distributed process groups.

`trainer.run_llm_train(config)` is the entry point; `fabriclab train --model gpt-tiny --np 4 --tp 2 --pp 2`
runs it.
"""
