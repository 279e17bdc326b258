"""A server's command line as config: flags a restart changed, never its secrets."""

from tui.core.serving.command_flags import command_flags


def test_vllm_module_entry_point_flags_become_config_keys():
    argv = ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m/tiny", "--host", "127.0.0.1",
            "--port", "8000", "--max-num-batched-tokens", "512", "--no-enable-prefix-caching", "--enforce-eager",
            "--max-model-len=4096", "--max-model-len", "2048"]
    assert command_flags(argv) == {"model": "/m/tiny", "max_num_batched_tokens": "512", "enable_prefix_caching": "False",
                                   "enforce_eager": "True", "max_model_len": "2048"}


def test_credentials_on_the_command_line_are_dropped():
    argv = ["vllm", "serve", "m", "--api-key", "sk-never-7f3a", "--hf-token=hf_secret", "--max-num-seqs", "64",
            "--auth-header", "Bearer x"]
    flags = command_flags(argv)
    assert flags == {"max_num_seqs": "64"}
    assert "sk-never-7f3a" not in str(flags) and "hf_secret" not in str(flags)
