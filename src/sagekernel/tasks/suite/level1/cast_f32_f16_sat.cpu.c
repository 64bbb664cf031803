#include <stdint.h>

/* float -> IEEE half, round to nearest even (F. Giesen's float_to_half_fast3_rtne). */
static uint16_t f32_to_f16(float f) {
    union { float f; uint32_t u; } v;
    v.f = f;
    uint32_t u = v.u;
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= 0x7fffffffu;
    uint16_t o;
    if (u >= 0x47800000u) {                      /* >= 65536, inf or NaN */
        o = (u > 0x7f800000u) ? 0x7e00u : 0x7c00u;
    } else if (u < 0x38800000u) {                /* half subnormal or zero */
        union { uint32_t u; float f; } magic, t;
        magic.u = (uint32_t)((127 - 15) + (23 - 10) + 1) << 23;
        t.u = u;
        t.f += magic.f;
        o = (uint16_t)(t.u - magic.u);
    } else {
        uint32_t mant_odd = (u >> 13) & 1u;
        u += ((uint32_t)(15 - 127) << 23) + 0xfffu;
        u += mant_odd;
        o = (uint16_t)(u >> 13);
    }
    return (uint16_t)(sign | o);
}

void sage_kernel(const float* restrict x, uint16_t* restrict out, int64_t B, int64_t D) {
    int64_t n = B * D;
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        if (v > 65504.0f) v = 65504.0f;
        if (v < -65504.0f) v = -65504.0f;
        out[i] = f32_to_f16(v);
    }
}
