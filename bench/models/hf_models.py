"""Public models from an installed package (transformers), tiny random configs
(nothing is downloaded), for the accuracy bench: GPT-2's forward and training
step, Llama's forward."""

import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM


def make_gpt2():
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0
    )
    model = GPT2LMHeadModel(config)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    return model, opt, torch.randint(0, 256, (2, 32))


# trainium: profile inputs=make_gpt2
@torch.no_grad()
def gpt2_forward(model, opt, ids):
    return model(input_ids=ids).logits


# trainium: profile inputs=make_gpt2
def gpt2_train_step(model, opt, ids):
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def make_llama():
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return LlamaForCausalLM(config).eval(), torch.randint(0, 256, (2, 32))


# trainium: profile inputs=make_llama
@torch.no_grad()
def llama_forward(model, ids):
    return model(input_ids=ids).logits
