"""A Hugging Face Trainer script: a tiny random Llama, synthetic data, gradient
accumulation, the Trainer's default (linear) LR scheduler. Its own step timer (a
TrainerCallback, from one step's end to the next) prints each step's time. ``--xla``: on
torch-xla's device, as optimum-neuron's ``NeuronTrainer`` (a Trainer subclass) runs on Trn1:
the Trainer takes the xla device where torch_xla is installed and its CPU flag is off."""

import argparse
import statistics
import tempfile
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n, seq, vocab):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (n, seq), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class StepTimer(TrainerCallback):
    """The script's own step timer: one step's end to the next's."""

    def __init__(self):
        self.last = None
        self.times = []

    def on_step_end(self, args, state, control, **kwargs):
        now = time.perf_counter()
        if self.last is not None:
            self.times.append((now - self.last) * 1e3)
            print(f"step {state.global_step} {self.times[-1]:.2f} ms", flush=True)
        self.last = now


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=14)
    p.add_argument("--accumulate", type=int, default=2)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--xla", action="store_true")
    args = p.parse_args()
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=128,
        hidden_size=args.hidden,
        intermediate_size=2 * args.hidden,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = LlamaForCausalLM(config)
    timer = StepTimer()
    with tempfile.TemporaryDirectory() as out:
        training = TrainingArguments(
            output_dir=out,
            max_steps=args.steps,
            per_device_train_batch_size=4,
            gradient_accumulation_steps=args.accumulate,
            learning_rate=1e-3,
            use_cpu=not args.xla,
            # the default (fused AdamW) runs on no xla device
            **({"optim": "adamw_torch"} if args.xla else {}),
            report_to="none",
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            dataloader_num_workers=0,
        )
        data = Tokens(4 * args.accumulate * args.steps, 32, config.vocab_size)
        trainer = Trainer(model=model, args=training, train_dataset=data, callbacks=[timer])
        trainer.train()
    print(
        f"trained {trainer.state.global_step} steps; median step {statistics.median(timer.times[2:]):.2f} ms"
    )


if __name__ == "__main__":
    main()
