/* fp16.h: the integer-arithmetic conversions (used where the compiler has no
 * _Float16, as clang 14 on x86 for the fuzz build) agree bit for bit with
 * the compiler's _Float16 on every binary16 pattern and on floats around
 * every rounding boundary. Skips (77) where this compiler lacks _Float16. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fp16.h"

#ifdef __FLT16_MAX__
static uint16_t hw_narrow(float f)
{
    _Float16 h = (_Float16)f;
    uint16_t b;
    memcpy(&b, &h, sizeof b);
    return b;
}

static void test_widening_matches_float16_on_every_pattern(void **state)
{
    (void)state;
    for (uint32_t b = 0; b < 65536; b++) {
        _Float16 h;
        uint16_t bits = (uint16_t)b;
        memcpy(&h, &bits, sizeof h);
        float want = (float)h, got = fp16_to_float_soft(bits);
        uint32_t wb, gb;
        memcpy(&wb, &want, 4);
        memcpy(&gb, &got, 4);
        if (want != want) /* NaN: any NaN with the same sign and payload */
            assert_true(got != got);
        else if (wb != gb)
            fail_msg("pattern 0x%04x: soft %a, _Float16 %a", b, (double)got, (double)want);
    }
}

/* Every half value, the midpoints between neighbours (ties), one float ulp
 * either side of them, and the ends of the range. */
static void test_narrowing_matches_float16_at_every_boundary(void **state)
{
    (void)state;
    uint32_t checked = 0;
    for (uint32_t b = 0; b < 0x7c00; b++) {
        for (int sgn = 0; sgn < 2; sgn++) {
            float lo = fp16_to_float_soft((uint16_t)b), hi = fp16_to_float_soft((uint16_t)(b + 1));
            float mid = lo + (hi - lo) / 2; /* exact: one more bit than binary16 */
            float probe[5] = {lo, mid, nextafterf(mid, 0), nextafterf(mid, 1e9f), hi};
            for (int k = 0; k < 5; k++) {
                float f = sgn ? -probe[k] : probe[k];
                uint16_t want = hw_narrow(f), got = fp16_from_float_soft(f);
                if (want != got)
                    fail_msg("%a: soft 0x%04x, _Float16 0x%04x", (double)f, got, want);
                checked++;
            }
        }
    }
    const float edge[] = {0.0f, -0.0f, 65504.0f, 65519.996f, 65520.0f, 1e9f, -1e9f, 1e-30f,
                          0x1p-25f, 0x1.0p-25f * 1.0000001f, 0x1p-24f, __builtin_inff(),
                          -__builtin_inff()};
    for (size_t k = 0; k < sizeof edge / sizeof edge[0]; k++)
        assert_int_equal(fp16_from_float_soft(edge[k]), hw_narrow(edge[k]));
    float nan = __builtin_nanf("");
    assert_int_equal(fp16_from_float_soft(nan) & 0x7e00, 0x7e00);
    assert_true(checked > 300000);
}
#endif

int main(void)
{
#ifdef __FLT16_MAX__
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_widening_matches_float16_on_every_pattern),
        cmocka_unit_test(test_narrowing_matches_float16_at_every_boundary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
#else
    printf("SKIP: this compiler has no _Float16 to compare with\n");
    return 77;
#endif
}
