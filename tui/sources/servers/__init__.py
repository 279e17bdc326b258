"""Every server process phasetop supervises: a command a person gave it (`--serve`, `tune`), vLLM, llama.cpp's
llama-server; started in their own process groups, waited on until healthy, stopped as a group."""
