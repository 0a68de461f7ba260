/* Error messages: status passes through, prefixes compose, long messages are
 * truncated but stay terminated. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"

static void test_err_set_returns_the_status_and_formats(void **state)
{
    (void)state;
    struct alisa_err e = {{0}};
    assert_int_equal(err_set(&e, ALISA_ECORRUPT, "step %d: %s", 118, "bad"), ALISA_ECORRUPT);
    assert_string_equal(e.msg, "step 118: bad");
    assert_int_equal(err_set(NULL, ALISA_EIO, "dropped"), ALISA_EIO);
    assert_int_equal(err_prefix(&e, ALISA_ECORRUPT, "%s", "x.trace"), ALISA_ECORRUPT);
    assert_string_equal(e.msg, "x.trace: step 118: bad");
    assert_string_equal(err_status_name(ALISA_ENOTFOUND), "not found");
}

static void test_err_long_messages_are_truncated_and_terminated(void **state)
{
    (void)state;
    struct alisa_err e = {{0}};
    char big[2000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    err_set(&e, ALISA_EINVAL, "%s", big);
    assert_int_equal(strlen(e.msg), sizeof e.msg - 1);
    err_prefix(&e, ALISA_EINVAL, "%s", "p");
    assert_int_equal(strlen(e.msg), sizeof e.msg - 1);
    assert_memory_equal(e.msg, "p: a", 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_err_set_returns_the_status_and_formats),
        cmocka_unit_test(test_err_long_messages_are_truncated_and_terminated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
