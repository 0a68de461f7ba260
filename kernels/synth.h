/* The generator of synthetic weights (exec/model.h llm_load_synthetic),
 * shared by the host and the CUDA backend's fill kernel so that both draw
 * the same numbers: a weight matrix on the GPU drawn by kern_synth_f16 is
 * the host's Q8_0 (or FP32) matrix rounded to FP16, bit for bit.
 *
 * Row r of matrix `id` under `seed` is one SplitMix64 stream. Q8_0 rows
 * (a whole number of 32-weight blocks) take a code in [-127, 127] from each
 * byte of a draw, low byte first, 8 codes a draw, times the block scale
 * SYNTH_A / 127 (stored as FP16); FP32 rows take one draw per weight,
 * uniform on [-SYNTH_A, SYNTH_A). Either way the standard deviation is
 * 0.02, HF's initial one. Header-only; no state.
 */
#ifndef ALISA_SYNTH_H
#define ALISA_SYNTH_H

#include <stdint.h>

#ifdef __CUDACC__
#define SYNTH_FN static inline __host__ __device__
#else
#define SYNTH_FN static inline
#endif

/* Half-width of the uniform distribution: 0.02 sqrt(3). */
#define SYNTH_A (0.02f * 1.7320508f)

/* The next SplitMix64 output of the stream at *x. */
SYNTH_FN uint64_t synth_next(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The stream of row r of matrix id. */
SYNTH_FN uint64_t synth_row_state(uint64_t seed, uint64_t id, uint64_t r)
{
    return seed ^ (id * 0x632be59bd9b4e019ULL) ^ (r * 0xd6e8feb86659fd93ULL);
}

/* An FP32 row's next weight. */
SYNTH_FN float synth_f32(uint64_t *st)
{
    return SYNTH_A * ((float)(synth_next(st) >> 40) / 8388608.0f - 1.0f);
}

/* The Q8_0 code in the low byte of bits. */
SYNTH_FN int synth_code(uint64_t bits)
{
    return (int)((bits & 0xff) * 255 / 256) - 127;
}

#endif
