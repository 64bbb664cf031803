#include "softmax_custom_tiling.h"
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"

namespace optiling {
static ge::graphStatus TilingFunc(gert::TilingContext* context)
{
    const gert::Shape& shape = context->GetInputShape(0)->GetStorageShape();
    const int64_t rows = shape.GetDim(0);
    const int64_t rowLength = shape.GetDim(1);
    auto platform = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
    const int64_t coreNum = platform.GetCoreNumAiv();
    uint64_t ubBytes = 0;
    platform.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ubBytes);

    constexpr int64_t kBlockElems = 32 / sizeof(float);
    const int64_t aligned = (rowLength + kBlockElems - 1) / kBlockElems * kBlockElems;
    // UB holds: the input row twice (double buffer), the output row twice, one work row and a
    // 32-byte reduction result. A row that does not fit is refused here, not corrupted later.
    const uint64_t needed = static_cast<uint64_t>(aligned) * sizeof(float) * 5 + 32;
    if (needed > ubBytes || rows < 1) {
        return ge::GRAPH_FAILED;
    }
    const int64_t used = rows < coreNum ? rows : coreNum;

    SoftmaxCustomTilingData tiling;
    tiling.set_rows(static_cast<uint32_t>(rows));
    tiling.set_rowLength(static_cast<uint32_t>(rowLength));
    tiling.set_alignedRowLength(static_cast<uint32_t>(aligned));
    tiling.set_formerNum(static_cast<uint32_t>(rows % used));
    tiling.set_formerRows(static_cast<uint32_t>(rows / used + 1));
    tiling.set_tailRows(static_cast<uint32_t>(rows / used));
    context->SetBlockDim(static_cast<uint32_t>(used));
    tiling.SaveToBuffer(context->GetRawTilingData()->GetData(), context->GetRawTilingData()->GetCapacity());
    context->GetRawTilingData()->SetDataSize(tiling.GetDataSize());
    size_t* workspace = context->GetWorkspaceSizes(1);
    workspace[0] = platform.GetLibApiWorkSpaceSize();
    return ge::GRAPH_SUCCESS;
}
}  // namespace optiling

namespace ge {
static ge::graphStatus InferShape(gert::InferShapeContext* context)
{
    *context->GetOutputShape(0) = *context->GetInputShape(0);
    return GRAPH_SUCCESS;
}

static ge::graphStatus InferDataType(gert::InferDataTypeContext* context)
{
    context->SetOutputDataType(0, context->GetInputDataType(0));
    return ge::GRAPH_SUCCESS;
}
}  // namespace ge

namespace ops {
class SoftmaxCustom : public OpDef {
public:
    explicit SoftmaxCustom(const char* name) : OpDef(name)
    {
        this->Input("x").ParamType(REQUIRED).DataType({ge::DT_FLOAT}).Format({ge::FORMAT_ND});
        this->Output("out").ParamType(REQUIRED).DataType({ge::DT_FLOAT}).Format({ge::FORMAT_ND});
        this->SetInferShape(ge::InferShape).SetInferDataType(ge::InferDataType);
        this->AICore().SetTiling(optiling::TilingFunc);
        this->AICore().AddConfig("ascend910b");
    }
};
OP_ADD(SoftmaxCustom);
}  // namespace ops
