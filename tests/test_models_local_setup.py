"""How the embedded model is set up before llama.cpp loads it (no llama-cpp-python needed)."""

from __future__ import annotations

from types import ModuleType, SimpleNamespace
from typing import Any

from sagekernel.models.local import _model_params, build_has_amx


def _fake_llama_cpp(info: bytes) -> Any:
    low = ModuleType("llama_cpp.llama_cpp")
    low.llama_model_default_params = lambda: SimpleNamespace(use_extra_bufts=True, n_gpu_layers=0)  # type: ignore[attr-defined]
    return SimpleNamespace(llama_cpp=low, llama_print_system_info=lambda: info)


def test_amx_kernels_are_read_from_the_builds_system_info() -> None:
    assert build_has_amx(_fake_llama_cpp(b"CPU : AVX2 = 1 | AMX_INT8 = 1 | REPACK = 1 |"))
    assert not build_has_amx(_fake_llama_cpp(b"CPU : AVX2 = 1 | AVX512 = 1 | REPACK = 1 |"))


def test_model_params_are_set_only_while_loading() -> None:
    fake = _fake_llama_cpp(b"")
    with _model_params(fake, use_extra_bufts=False, not_a_field=1):
        params = fake.llama_cpp.llama_model_default_params()
        assert params.use_extra_bufts is False and not hasattr(params, "not_a_field")
    assert fake.llama_cpp.llama_model_default_params().use_extra_bufts is True
