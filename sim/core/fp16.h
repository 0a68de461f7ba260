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

/* Rounds f to the nearest binary16 value; overflow gives +-inf. Cannot fail. */
static inline uint16_t fp16_from_float(float f)
{
    _Float16 h = (_Float16)f;
    uint16_t bits;
    memcpy(&bits, &h, sizeof bits);
    return bits;
}

/* Exact widening of a binary16 bit pattern. Cannot fail. */
static inline float fp16_to_float(uint16_t bits) { return fp16_table[bits]; }

#endif
