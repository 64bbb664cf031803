"""Grammar-constrained sampling for the embedded model that checks the likely tokens first.

llama-cpp-python puts llama.cpp's grammar sampler in front of top-k, so every generated token
tests all 151,936 vocabulary entries against the grammar: 26 ms a token on this 2-core machine,
a quarter of the generation time (10.8 tokens/s without, 8.4 with). llama.cpp's own `common`
sampler avoids that by checking the likely candidates first; this module does the same inside
llama-cpp-python's sampler chain:

- `ShortlistGrammar` is a llama.cpp sampler (its C interface, implemented here with ctypes) that
  holds the real grammar sampler. Applied, it takes the `SHORTLIST` highest logits, asks the
  grammar which of them it admits, and keeps those; only when none is admitted does it apply the
  grammar to the whole vocabulary. Accepting a token forwards it to the grammar.
- `sampler_chain` builds the chain llama-cpp-python would (repetition penalties, then greedy at
  temperature 0, else top-k, typical, top-p, min-p, temperature, distribution) with this stage
  where the grammar stood.

Top-k (40) then cuts to at most 40 tokens anyway, so the tokens that can be sampled are the same
whenever the shortlist holds the 40 most likely admitted tokens; at temperature 0 the reply is the
same as under the full grammar (tests/test_agent_grammar.py, `local`).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

#: How many of the highest logits are checked against the grammar before the whole vocabulary.
SHORTLIST = 64

_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


class ShortlistGrammar:
    """A llama.cpp sampler: the grammar, checked on the shortlist first (module docstring)."""

    def __init__(self, llama_cpp: Any, vocab: Any, grammar: str) -> None:
        self._lib = llama_cpp
        self.grammar = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root")
        if not self.grammar:
            raise ValueError("llama.cpp cannot parse the grammar")
        self.full_checks = 0  # tokens for which the shortlist held no admitted token
        self._small = (llama_cpp.llama_token_data * SHORTLIST)()
        self._small_view = np.frombuffer(self._small, dtype=_TOKEN_DATA)
        self._small_array = llama_cpp.llama_token_data_array(
            data=ctypes.cast(self._small, llama_cpp.llama_token_data_p), size=SHORTLIST, selected=-1,
            sorted=False)

        def apply(_smpl: Any, cur_p: Any) -> None:
            self._apply(cur_p)

        def accept(_smpl: Any, token: int) -> None:
            self._lib.llama_sampler_accept(self.grammar, token)

        iface = llama_cpp.llama_sampler_i()
        iface.name = llama_cpp.llama_sampler_i_name(0)
        iface.apply = llama_cpp.llama_sampler_i_apply(apply)
        iface.accept = llama_cpp.llama_sampler_i_accept(accept)
        iface.reset = llama_cpp.llama_sampler_i_reset(0)
        iface.clone = llama_cpp.llama_sampler_i_clone(0)
        iface.free = llama_cpp.llama_sampler_i_free(0)
        self._callbacks = (apply, accept, iface)  # the C side holds raw pointers to these
        self.sampler = llama_cpp.llama_sampler()
        self.sampler.iface = ctypes.pointer(iface)
        self.sampler.ctx = None

    def _apply(self, cur_p: Any) -> None:
        array = cur_p.contents
        n = int(array.size)
        if n <= SHORTLIST:
            self._lib.llama_sampler_apply(self.grammar, cur_p)
            return
        buffer = (self._lib.llama_token_data * n).from_address(ctypes.addressof(array.data.contents))
        view = np.frombuffer(buffer, dtype=_TOKEN_DATA)
        top = np.argpartition(view["logit"], n - SHORTLIST)[n - SHORTLIST:]
        self._small_view[:] = view[top]
        self._small_array.size, self._small_array.selected, self._small_array.sorted = SHORTLIST, -1, False
        self._lib.llama_sampler_apply(self.grammar, ctypes.byref(self._small_array))
        admitted = self._small_view[np.isfinite(self._small_view["logit"])]
        if len(admitted) == 0:  # the grammar wants a token the model finds unlikely: check them all
            self.full_checks += 1
            self._lib.llama_sampler_apply(self.grammar, cur_p)
            return
        view[: len(admitted)] = admitted
        array.size, array.selected, array.sorted = len(admitted), -1, False

    def close(self) -> None:
        if self.grammar:
            self._lib.llama_sampler_free(self.grammar)
            self.grammar = None


def sampler_chain(llama_cpp: Any, llm: Any, grammar: ShortlistGrammar, *, temperature: float, seed: int,
                  repeat_penalty: float, top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05,
                  typical_p: float = 1.0) -> Any:
    """llama-cpp-python's default chain (Llama._init_sampler) with the grammar stage replaced."""
    from llama_cpp import _internals

    chain = _internals.LlamaSampler()
    chain.add_penalties(n_vocab=llm._n_vocab, penalty_last_n=llm.last_n_tokens_size,
                        penalty_repeat=repeat_penalty, penalty_freq=0.0, penalty_present=0.0)
    llama_cpp.llama_sampler_chain_add(chain.sampler, ctypes.pointer(grammar.sampler))
    # the chain must not free the Python-owned stage: take it out before the chain is freed
    chain.custom_samplers.append((llama_cpp.llama_sampler_chain_n(chain.sampler) - 1, grammar))
    if temperature == 0.0:
        chain.add_greedy()
    else:
        chain.add_top_k(top_k)
        chain.add_typical(typical_p, 1)
        chain.add_top_p(top_p, 1)
        chain.add_min_p(min_p, 1)
        chain.add_temp(temperature)
        chain.add_dist(seed)
    return chain
