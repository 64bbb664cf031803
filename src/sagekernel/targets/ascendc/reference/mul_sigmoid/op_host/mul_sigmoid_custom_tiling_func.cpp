#include "mul_sigmoid_custom_tiling.h"

// Split totalLength elements over the cores in whole 32-byte blocks: the first formerNum cores
// take one block more than the others, so no core gets a ragged share except through the
// global tail, which the kernel clamps with DataCopyPad.
void ComputeMulSigmoidCustomTiling(MulSigmoidCustomTilingData& t, uint32_t coreNum, uint64_t ubBytes)
{
    constexpr int64_t kBlockElems = 32 / sizeof(float);
    const int64_t blocks = (t.totalLength + kBlockElems - 1) / kBlockElems;
    int64_t used = blocks < static_cast<int64_t>(coreNum) ? blocks : static_cast<int64_t>(coreNum);
    if (used < 1) {
        used = 1;
    }
    const int64_t perCore = blocks / used;
    t.usedCoreNum = static_cast<uint32_t>(used);
    t.formerNum = blocks % used;
    t.formerLength = (perCore + 1) * kBlockElems;
    t.tailLength = perCore * kBlockElems;
    // Three queues (x, y, out), each double-buffered: six tiles in UB, with half of UB kept free.
    const int64_t ubElems = static_cast<int64_t>(ubBytes / sizeof(float));
    int64_t tile = ubElems / 12 / kBlockElems * kBlockElems;
    if (tile > 8192) {
        tile = 8192;
    }
    t.tileLength = tile;
    t.bufferNum = 2;
}
