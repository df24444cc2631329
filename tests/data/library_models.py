"""Models from installed packages, profiled with and without --include."""

import torch


def make_llama(device):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = LlamaForCausalLM(config).eval()  # random weights: nothing is downloaded
    return model, torch.randint(0, 256, (2, 32), device=device)


# trainium: profile inputs=make_llama
@torch.no_grad()
def llama_forward(model, ids):
    return model(input_ids=ids).logits


def make_mha():
    return torch.nn.MultiheadAttention(64, 4, batch_first=True), torch.randn(2, 32, 64)


# trainium: profile inputs=make_mha
@torch.no_grad()
def attend(mha, x):
    out, _ = mha(x, x, x, need_weights=False)
    return out
