/* IEEE binary16 storage conversions, used by the trace format (and later the
 * KV arenas). Values are stored as uint16_t bit patterns so files and structs
 * never depend on a compiler's half type. Narrowing uses the compiler's
 * _Float16 (round to nearest even); widening reads a 65,536-entry table
 * filled once at program start (fp16.c), since software conversion is slow
 * without F16C and the table needs no CPU feature.
 */
#ifndef ALISA_FP16_H
#define ALISA_FP16_H

#include <stdint.h>
#include <string.h>

/* (65536) the float value of every binary16 bit pattern; filled before main. */
extern float fp16_table[65536];

/* The same rounding in integer arithmetic (round to nearest, ties to
 * even; NaN stays a quiet NaN), for compilers without _Float16 (clang 14 on
 * x86, which builds the fuzz harnesses); tests/test_fp16.c checks it
 * against _Float16 bit for bit. Cannot fail. */
static inline uint16_t fp16_from_float_soft(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);      /* NaN */
    if (ax >= 0x47800000u)
        return (uint16_t)(sign | 0x7c00u);      /* 65536 and up, inf: inf */
    uint32_t h, rem, half;
    if (ax >= 0x38800000u) {                    /* a normal binary16 */
        h = ((ax >> 23) - 112u) << 10 | ((ax >> 13) & 0x3ffu);
        rem = ax & 0x1fffu;
        half = 0x1000u;
    } else {                                    /* subnormal or zero */
        uint32_t shift = 126u - (ax >> 23);
        if (shift > 24)
            return (uint16_t)sign;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        h = m >> shift;
        rem = m & ((1u << shift) - 1);
        half = 1u << (shift - 1);
    }
    if (rem > half || (rem == half && (h & 1u)))
        h++;                                    /* a carry into the exponent is right */
    return (uint16_t)(sign | h);
}

/* Rounds f to the nearest binary16 value; overflow gives +-inf. Cannot fail. */
static inline uint16_t fp16_from_float(float f)
{
#ifdef __FLT16_MAX__
    _Float16 h = (_Float16)f;
    uint16_t bits;
    memcpy(&bits, &h, sizeof bits);
    return bits;
#else
    return fp16_from_float_soft(f);
#endif
}

/* Exact widening in integer arithmetic (what fp16_table holds where the
 * compiler lacks _Float16). Cannot fail. */
static inline float fp16_to_float_soft(uint16_t bits)
{
    uint32_t sign = (uint32_t)(bits & 0x8000u) << 16, e = (bits >> 10) & 0x1fu, m = bits & 0x3ffu;
    float f;
    if (e == 0) { /* zero or subnormal: m x 2^-24, exact in float */
        f = (float)m * 0x1p-24f;
        return sign ? -f : f;
    }
    uint32_t x = sign | (e == 31 ? 0x7f800000u | m << 13 : (e + 112u) << 23 | m << 13);
    memcpy(&f, &x, sizeof f);
    return f;
}

/* Exact widening of a binary16 bit pattern. Cannot fail. */
static inline float fp16_to_float(uint16_t bits) { return fp16_table[bits]; }

#endif
