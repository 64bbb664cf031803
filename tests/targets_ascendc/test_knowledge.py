"""The cold-start knowledge: files load, the seed memory is well formed and covers the topics."""

from __future__ import annotations

import json

from sagekernel import db
from sagekernel.memory.io import load_seed
from sagekernel.targets.ascendc.target import AscendCTarget

TOPICS = {
    "32-byte DataCopy alignment": "32-byte",
    "DataCopyPad tails": "DataCopyPad",
    "UB capacity": "UB",
    "InitBuffer sizes": "InitBuffer",
    "TQue depth / double buffering": "TQue",
    "GetBlockIdx": "GetBlockIdx",
    "host vs device memory": "ValueDepend",
    "scalars through tiling": "GetAttrPointer",
    "TilingData field types": "TILING_DATA_FIELD_DEF(float",
    "cube/vector kernel types": "KERNEL_TYPE_AIV_ONLY",
    "PIPE_ALL vs events": "PIPE_ALL",
    "Matmul API tiling": "TCubeTiling",
}


def test_seed_items_are_well_formed_and_cover_the_topics():
    path = AscendCTarget().seed_memory_path()
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert len(rows) >= 30
    assert len({r["title"] for r in rows}) == len(rows)
    for r in rows:
        assert set(r) == {"title", "type", "category", "error_message", "wrong_code", "correct_code"}
        assert all(isinstance(v, str) and v.strip() for v in r.values())
        assert r["wrong_code"] != r["correct_code"]
    text = path.read_text()
    missing = [topic for topic, needle in TOPICS.items() if needle not in text]
    assert missing == []


def test_seed_loads_into_a_fresh_store(tmp_path):
    conn = db.connect(tmp_path / "ws")
    assert load_seed(conn, AscendCTarget().seed_memory_path()) >= 30


def test_knowledge_texts():
    k = AscendCTarget().knowledge()
    assert "DataCopyPad" in k.quick_reference and "GetBlockIdx" in k.quick_reference
    assert "follow-fork-mode child" in k.debugging_guide
    assert 'extern "C" __global__ __aicore__ void add_custom(' in k.example


def test_audit_facts_n1_to_n4():
    """N1: TQue depth is not double buffering (InitBuffer num is); N2: InitBuffer rounds len up to
    32 bytes; N3: a Matmul result may go to a VECIN tensor on A2; N4: the 910B facts are stated."""
    k = AscendCTarget().knowledge()
    seed = AscendCTarget().seed_memory_path().read_text()
    assert "depth 2 = double buffering" not in k.quick_reference
    assert "num = 2: double buffering" in k.quick_reference
    assert "TQue depth is unrelated" in seed and "asks for 2 buffers the queue cannot hold" not in seed
    assert "InitBuffer fails" not in seed and "InitBuffer rounds len up to 32 bytes" in seed
    assert "cube wrote it to L0C/GM; values are stale" not in seed and "TPosition::VECIN" in seed
    for fact in (
        "uint8_t",
        "no bfloat16 arithmetic",
        "SetSysWorkspace",
        "DumpTensor",
        "REGISTER_TILING_DEFAULT",
    ):
        assert fact in k.quick_reference, fact
        assert fact.split()[0] in seed, fact
