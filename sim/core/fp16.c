/* The binary16 widening table (contract in fp16.h). Filled by a constructor
 * before main, from the compiler's exact _Float16 -> float conversion, so it
 * is read-only afterwards and safe to share between threads.
 */
#include "fp16.h"

float fp16_table[65536];

__attribute__((constructor)) static void fp16_fill(void)
{
    for (uint32_t b = 0; b < 65536; b++) {
        uint16_t bits = (uint16_t)b;
#ifdef __FLT16_MAX__
        _Float16 h;
        memcpy(&h, &bits, sizeof h);
        fp16_table[b] = (float)h;
#else
        fp16_table[b] = fp16_to_float_soft(bits);
#endif
    }
}
