#include "kernel_operator.h"
#include "abs_custom_tiling.h"

using namespace AscendC;

constexpr int32_t BUFFER_NUM = 2;

class KernelAbs {
public:
    __aicore__ inline KernelAbs() {}

    __aicore__ inline void Init(GM_ADDR x, GM_ADDR out, const AbsCustomTilingData& t)
    {
        const int64_t block = GetBlockIdx();
        int64_t start = 0;
        int64_t length = 0;
        if (block < t.formerNum) {
            start = block * t.formerLength;
            length = t.formerLength;
        } else {
            start = t.formerNum * t.formerLength + (block - t.formerNum) * t.tailLength;
            length = t.tailLength;
        }
        if (start + length > t.totalLength) {
            length = t.totalLength - start;  // the global tail: this core's share is ragged
        }
        length_ = length > 0 ? length : 0;
        tileLength_ = t.tileLength;
        xGm_.SetGlobalBuffer((__gm__ float*)x + start, length_);
        outGm_.SetGlobalBuffer((__gm__ float*)out + start, length_);
        pipe_.InitBuffer(inQueue_, BUFFER_NUM, tileLength_ * sizeof(float));
        pipe_.InitBuffer(outQueue_, BUFFER_NUM, tileLength_ * sizeof(float));
    }

    __aicore__ inline void Process()
    {
        for (int64_t offset = 0; offset < length_; offset += tileLength_) {
            const int64_t n = length_ - offset < tileLength_ ? length_ - offset : tileLength_;
            CopyIn(offset, n);
            Compute(n);
            CopyOut(offset, n);
        }
    }

private:
    __aicore__ inline void CopyIn(int64_t offset, int64_t n)
    {
        LocalTensor<float> x = inQueue_.AllocTensor<float>();
        DataCopyExtParams copy{1, static_cast<uint32_t>(n * sizeof(float)), 0, 0, 0};
        DataCopyPadExtParams<float> pad{false, 0, 0, 0.0f};
        DataCopyPad(x, xGm_[offset], copy, pad);
        inQueue_.EnQue(x);
    }

    __aicore__ inline void Compute(int64_t n)
    {
        LocalTensor<float> x = inQueue_.DeQue<float>();
        LocalTensor<float> y = outQueue_.AllocTensor<float>();
        Abs(y, x, static_cast<uint32_t>(n));
        outQueue_.EnQue(y);
        inQueue_.FreeTensor(x);
    }

    __aicore__ inline void CopyOut(int64_t offset, int64_t n)
    {
        LocalTensor<float> y = outQueue_.DeQue<float>();
        DataCopyExtParams copy{1, static_cast<uint32_t>(n * sizeof(float)), 0, 0, 0};
        DataCopyPad(outGm_[offset], y, copy);
        outQueue_.FreeTensor(y);
    }

    TPipe pipe_;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueue_;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueue_;
    GlobalTensor<float> xGm_;
    GlobalTensor<float> outGm_;
    int64_t length_ = 0;
    int64_t tileLength_ = 0;
};

extern "C" __global__ __aicore__ void abs_custom(GM_ADDR x, GM_ADDR out, GM_ADDR workspace, GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    AbsCustomTilingData t;
    SageCopyTiling(&t, tiling);
    KernelAbs op;
    op.Init(x, out, t);
    op.Process();
}
