"""The KV cache as vLLM's V1 block pool: fixed 16-token blocks, reference counts, and a prefix cache
of full blocks keyed by a chained hash, evicted least-recently-freed first."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence

BLOCK_SIZE = 16
"""Tokens per KV block (vLLM's default on CUDA)."""


def block_hashes(token_ids: Sequence[int]) -> tuple[int, ...]:
    """One hash per full block; each covers every token before it, so equal hashes mean equal prefixes."""
    hashes = []
    previous = 0
    for start in range(0, len(token_ids) - BLOCK_SIZE + 1, BLOCK_SIZE):
        previous = hash((previous, tuple(token_ids[start : start + BLOCK_SIZE])))
        hashes.append(previous)
    return tuple(hashes)


class BlockPool:
    """Blocks in use hold a reference count; free blocks keep their cached contents until reused."""

    def __init__(self, num_blocks: int, caching: bool = True) -> None:
        self.num_blocks = num_blocks
        self.caching = caching
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        """Free blocks, the next to reuse first."""
        self._refs = [0] * num_blocks
        self._hash_of: dict[int, int] = {}
        self._block_of: dict[int, int] = {}

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def usage(self) -> float:
        """Share of blocks referenced by a sequence (vLLM's kv_cache_usage_perc, 0..1)."""
        return (self.num_blocks - len(self._free)) / self.num_blocks if self.num_blocks else 0.0

    @property
    def num_cached(self) -> int:
        return len(self._block_of)

    def allocate(self, count: int) -> list[int]:
        """Take `count` free blocks, evicting whatever prefix they cached."""
        if count > len(self._free):
            raise MemoryError(f"{count} blocks asked, {len(self._free)} free")
        blocks = []
        for _ in range(count):
            block, _ = self._free.popitem(last=False)
            cached = self._hash_of.pop(block, None)
            if cached is not None:
                del self._block_of[cached]
            self._refs[block] = 1
            blocks.append(block)
        return blocks

    def lookup(self, hashes: Iterable[int]) -> list[int]:
        """The cached blocks of the longest prefix of `hashes`."""
        hits = []
        for block_hash in hashes:
            block = self._block_of.get(block_hash)
            if block is None:
                break
            hits.append(block)
        return hits

    def touch(self, blocks: Iterable[int]) -> None:
        """Take a reference on cached blocks (a prefix hit), pulling free ones out of the free list."""
        for block in blocks:
            if self._refs[block] == 0:
                del self._free[block]
            self._refs[block] += 1

    def free(self, blocks: Sequence[int]) -> None:
        """Drop a reference on each block; tail blocks go first in line for reuse, as in vLLM."""
        for block in reversed(blocks):
            self._refs[block] -= 1
            if self._refs[block] == 0:
                self._free[block] = None

    def register(self, block: int, block_hash: int) -> None:
        """Enter a full block in the prefix cache (the first block with a given hash wins)."""
        if self.caching and block_hash not in self._block_of and block not in self._hash_of:
            self._block_of[block_hash] = block
            self._hash_of[block] = block_hash
