/* Helpers for the executor's tests (contract in testexec.h). */
#include "testexec.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

const char *tu_stories260k(void)
{
    static char path[600];
    snprintf(path, sizeof path, "%s/stories260K/stories260K.bin", tu_models_dir());
    return path;
}

struct llm_model *tu_model_or_skip(const char *path, enum llm_weight_mode mode)
{
    if (access(path, R_OK) != 0) {
        if (tu_ci())
            fail_msg("CI=true and %s is missing", path);
        tu_skip();
    }
    struct llm_model *m;
    struct alisa_err e = {{0}};
    if (llm_load(&m, path, mode, &e))
        fail_msg("%s", e.msg);
    return m;
}
