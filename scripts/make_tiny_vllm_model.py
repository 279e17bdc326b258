"""Build a tiny Llama model directory for vLLM's `--load-format dummy`: a config and a tokenizer, no weights.

vLLM fills random weights, so the text is noise but the server (scheduler, chunked prefill, prefix cache,
/metrics, wire format) is vLLM's own. The byte-level BPE tokenizer is trained offline on this Python's
standard library sources, so nothing is downloaded. Run it with the vLLM venv's python (tokenizers and
transformers come with vLLM):

    python scripts/make_tiny_vllm_model.py OUT_DIR
"""

import glob
import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, PreTrainedTokenizerFast

VOCAB_SIZE = 4096
MAX_POSITIONS = 4096
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def train_tokenizer() -> Tokenizer:
    sources = sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py")))[:150]
    tokenizer = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train(sources, trainer)
    bos = tokenizer.token_to_id("<s>")
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    return tokenizer


def main(out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    tokenizer = train_tokenizer()
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        model_max_length=MAX_POSITIONS,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    wrapped.save_pretrained(out_dir)

    config = LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=MAX_POSITIONS,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        bos_token_id=tokenizer.token_to_id("<s>"),
        eos_token_id=tokenizer.token_to_id("</s>"),
        pad_token_id=tokenizer.token_to_id("<pad>"),
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    config.architectures = ["LlamaForCausalLM"]
    config.save_pretrained(out_dir)

    # Older readers look for the chat template in tokenizer_config.json.
    tokenizer_config_path = os.path.join(out_dir, "tokenizer_config.json")
    with open(tokenizer_config_path) as f:
        tokenizer_config = json.load(f)
    tokenizer_config["chat_template"] = CHAT_TEMPLATE
    with open(tokenizer_config_path, "w") as f:
        json.dump(tokenizer_config, f, indent=2)
    print(f"tiny model (vocab {tokenizer.get_vocab_size()}) in {out_dir}", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_tiny_vllm_model.py OUT_DIR")
    main(sys.argv[1])
