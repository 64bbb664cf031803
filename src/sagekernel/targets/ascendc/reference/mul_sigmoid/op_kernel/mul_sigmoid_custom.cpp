#include "kernel_operator.h"
#include "mul_sigmoid_custom_tiling.h"

using namespace AscendC;

constexpr int32_t BUFFER_NUM = 2;

// out = x * sigmoid(y) = x / (1 + exp(-y)), from basic vector instructions (Sigmoid is the
// operator itself and is not allowed for this task).
class KernelMulSigmoid {
public:
    __aicore__ inline KernelMulSigmoid() {}

    __aicore__ inline void Init(GM_ADDR x, GM_ADDR y, GM_ADDR out, const MulSigmoidCustomTilingData& t)
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
            length = t.totalLength - start;
        }
        length_ = length > 0 ? length : 0;
        tileLength_ = t.tileLength;
        xGm_.SetGlobalBuffer((__gm__ float*)x + start, length_);
        yGm_.SetGlobalBuffer((__gm__ float*)y + start, length_);
        outGm_.SetGlobalBuffer((__gm__ float*)out + start, length_);
        pipe_.InitBuffer(xQueue_, BUFFER_NUM, tileLength_ * sizeof(float));
        pipe_.InitBuffer(yQueue_, BUFFER_NUM, tileLength_ * sizeof(float));
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
        LocalTensor<float> x = xQueue_.AllocTensor<float>();
        LocalTensor<float> y = yQueue_.AllocTensor<float>();
        DataCopyExtParams copy{1, static_cast<uint32_t>(n * sizeof(float)), 0, 0, 0};
        DataCopyPadExtParams<float> pad{false, 0, 0, 0.0f};
        DataCopyPad(x, xGm_[offset], copy, pad);
        DataCopyPad(y, yGm_[offset], copy, pad);
        xQueue_.EnQue(x);
        yQueue_.EnQue(y);
    }

    __aicore__ inline void Compute(int64_t n)
    {
        const uint32_t count = static_cast<uint32_t>(n);
        LocalTensor<float> x = xQueue_.DeQue<float>();
        LocalTensor<float> y = yQueue_.DeQue<float>();
        LocalTensor<float> out = outQueue_.AllocTensor<float>();
        Muls(y, y, -1.0f, count);
        Exp(y, y, count);
        Adds(y, y, 1.0f, count);
        Div(out, x, y, count);
        outQueue_.EnQue(out);
        xQueue_.FreeTensor(x);
        yQueue_.FreeTensor(y);
    }

    __aicore__ inline void CopyOut(int64_t offset, int64_t n)
    {
        LocalTensor<float> out = outQueue_.DeQue<float>();
        DataCopyExtParams copy{1, static_cast<uint32_t>(n * sizeof(float)), 0, 0, 0};
        DataCopyPad(outGm_[offset], out, copy);
        outQueue_.FreeTensor(out);
    }

    TPipe pipe_;
    TQue<QuePosition::VECIN, BUFFER_NUM> xQueue_;
    TQue<QuePosition::VECIN, BUFFER_NUM> yQueue_;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueue_;
    GlobalTensor<float> xGm_;
    GlobalTensor<float> yGm_;
    GlobalTensor<float> outGm_;
    int64_t length_ = 0;
    int64_t tileLength_ = 0;
};

extern "C" __global__ __aicore__ void mul_sigmoid_custom(GM_ADDR x, GM_ADDR y, GM_ADDR out, GM_ADDR workspace,
                                                         GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    MulSigmoidCustomTilingData t;
    SageCopyTiling(&t, tiling);
    KernelMulSigmoid op;
    op.Init(x, y, out, t);
    op.Process();
}
