#ifndef SOFTMAX_CUSTOM_TILING_H
#define SOFTMAX_CUSTOM_TILING_H
#include "register/tilingdata_base.h"

namespace optiling {
BEGIN_TILING_DATA_DEF(SoftmaxCustomTilingData)
TILING_DATA_FIELD_DEF(uint32_t, rows);              // B: rows to normalise
TILING_DATA_FIELD_DEF(uint32_t, rowLength);         // D: elements per row
TILING_DATA_FIELD_DEF(uint32_t, alignedRowLength);  // D rounded up to a 32-byte block
TILING_DATA_FIELD_DEF(uint32_t, formerNum);         // cores that take formerRows rows
TILING_DATA_FIELD_DEF(uint32_t, formerRows);
TILING_DATA_FIELD_DEF(uint32_t, tailRows);          // rows of every other core
END_TILING_DATA_DEF;

REGISTER_TILING_DATA_CLASS(SoftmaxCustom, SoftmaxCustomTilingData)
}  // namespace optiling
#endif  // SOFTMAX_CUSTOM_TILING_H
