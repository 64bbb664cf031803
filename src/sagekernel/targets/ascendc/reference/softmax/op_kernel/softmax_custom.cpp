#include "kernel_operator.h"

using namespace AscendC;

constexpr int32_t BUFFER_NUM = 2;

// One row at a time: max, subtract, exp, sum, scale. The row is padded to a 32-byte block in
// UB; every vector instruction is given the true row length, so the pad never enters a result.
class KernelSoftmax {
public:
    __aicore__ inline KernelSoftmax() {}

    __aicore__ inline void Init(GM_ADDR x, GM_ADDR out, uint32_t rowLength, uint32_t alignedRowLength,
                                uint32_t formerNum, uint32_t formerRows, uint32_t tailRows)
    {
        const uint32_t block = GetBlockIdx();
        uint32_t firstRow = 0;
        if (block < formerNum) {
            firstRow = block * formerRows;
            rowCount_ = formerRows;
        } else {
            firstRow = formerNum * formerRows + (block - formerNum) * tailRows;
            rowCount_ = tailRows;
        }
        rowLength_ = rowLength;
        const uint64_t offset = static_cast<uint64_t>(firstRow) * rowLength;
        xGm_.SetGlobalBuffer((__gm__ float*)x + offset, static_cast<uint64_t>(rowCount_) * rowLength);
        outGm_.SetGlobalBuffer((__gm__ float*)out + offset, static_cast<uint64_t>(rowCount_) * rowLength);
        pipe_.InitBuffer(inQueue_, BUFFER_NUM, alignedRowLength * sizeof(float));
        pipe_.InitBuffer(outQueue_, BUFFER_NUM, alignedRowLength * sizeof(float));
        pipe_.InitBuffer(workBuf_, alignedRowLength * sizeof(float));
        pipe_.InitBuffer(reduceBuf_, 32);
    }

    __aicore__ inline void Process()
    {
        for (uint32_t r = 0; r < rowCount_; ++r) {
            CopyIn(r);
            Compute();
            CopyOut(r);
        }
    }

private:
    __aicore__ inline void CopyIn(uint32_t r)
    {
        LocalTensor<float> x = inQueue_.AllocTensor<float>();
        DataCopyExtParams copy{1, static_cast<uint32_t>(rowLength_ * sizeof(float)), 0, 0, 0};
        DataCopyPadExtParams<float> pad{false, 0, 0, 0.0f};
        DataCopyPad(x, xGm_[static_cast<uint64_t>(r) * rowLength_], copy, pad);
        inQueue_.EnQue(x);
    }

    __aicore__ inline float ReadScalar(const LocalTensor<float>& t)
    {
        // The vector pipe wrote t; the scalar unit must wait for it before reading.
        event_t vToS = static_cast<event_t>(GetTPipePtr()->FetchEventID(HardEvent::V_S));
        SetFlag<HardEvent::V_S>(vToS);
        WaitFlag<HardEvent::V_S>(vToS);
        return t.GetValue(0);
    }

    __aicore__ inline void Compute()
    {
        const int32_t n = static_cast<int32_t>(rowLength_);
        LocalTensor<float> x = inQueue_.DeQue<float>();
        LocalTensor<float> y = outQueue_.AllocTensor<float>();
        LocalTensor<float> work = workBuf_.Get<float>();
        LocalTensor<float> reduced = reduceBuf_.Get<float>();
        ReduceMax(reduced, x, work, n);
        const float rowMax = ReadScalar(reduced);
        Adds(y, x, -rowMax, n);
        Exp(y, y, n);
        ReduceSum(reduced, y, work, n);
        const float rowSum = ReadScalar(reduced);
        Muls(y, y, 1.0f / rowSum, n);
        outQueue_.EnQue(y);
        inQueue_.FreeTensor(x);
    }

    __aicore__ inline void CopyOut(uint32_t r)
    {
        LocalTensor<float> y = outQueue_.DeQue<float>();
        DataCopyExtParams copy{1, static_cast<uint32_t>(rowLength_ * sizeof(float)), 0, 0, 0};
        DataCopyPad(outGm_[static_cast<uint64_t>(r) * rowLength_], y, copy);
        outQueue_.FreeTensor(y);
    }

    TPipe pipe_;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueue_;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueue_;
    TBuf<TPosition::VECCALC> workBuf_;
    TBuf<TPosition::VECCALC> reduceBuf_;
    GlobalTensor<float> xGm_;
    GlobalTensor<float> outGm_;
    uint32_t rowCount_ = 0;
    uint32_t rowLength_ = 0;
};

extern "C" __global__ __aicore__ void softmax_custom(GM_ADDR x, GM_ADDR out, GM_ADDR workspace, GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    GET_TILING_DATA(tilingData, tiling);
    KernelSoftmax op;
    op.Init(x, out, tilingData.rowLength, tilingData.alignedRowLength, tilingData.formerNum,
            tilingData.formerRows, tilingData.tailRows);
    op.Process();
}
