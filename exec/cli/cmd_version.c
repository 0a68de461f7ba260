/* alisa version: the version, the git revision, whether CUDA was compiled
 * in, and the accelerator found. In exec/cli/ because it asks the executor's
 * device probe (exec/device.h), which never fails.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmds.h"
#include "device.h"
#include "git_version.h"

void cmd_version_usage(FILE *out)
{
    fprintf(out, "usage: alisa version\n\nPrints the version, the git revision it was built "
                 "from, whether CUDA was\ncompiled in, and the accelerator found (if any).\n"
            "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa version\n");
}

int cmd_version(int argc, char **argv)
{
    if (argc > 1) {
        if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
            cmd_version_usage(stdout);
            return 0;
        }
        return cli_usage_error(cmd_version_usage, "unexpected argument '%s'", argv[1]);
    }
    struct device_info d;
    device_probe(&d);
    printf("alisa %s (%s)\n", ALISA_VERSION, ALISA_GIT_VERSION);
    printf("cuda: %s\n", d.cuda_built ? "built" : "not built");
    if (d.n_devices)
        printf("device: %s, %.1f GiB, compute capability %d.%d (%d device%s)\n", d.name,
               d.mem_bytes / (1024.0 * 1024 * 1024), d.cc_major, d.cc_minor, d.n_devices,
               d.n_devices > 1 ? "s" : "");
    if (d.n_devices)
        printf("driver: %s\n", d.driver[0] ? d.driver : "unknown");
    else
        printf("device: none (%s)\n", d.note);
    return 0;
}
