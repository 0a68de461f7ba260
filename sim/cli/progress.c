/* Progress lines on a terminal (contract in progress.h). */
#include "progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

void progress_start(struct progress *p, const char *what, const char *unit, uint64_t total,
                    int quiet)
{
    memset(p, 0, sizeof *p);
    snprintf(p->what, sizeof p->what, "%s", what);
    p->unit = unit;
    p->total = total;
    const char *env = getenv("ALISA_PROGRESS");
    p->on = env && *env ? strcmp(env, "0") != 0 : !quiet && isatty(STDERR_FILENO);
    p->start_s = p->drawn_s = cli_now_s();
}

static void clock_text(char *buf, size_t n, double s)
{
    unsigned t = s < 0 ? 0 : s > 359999 ? 359999 : (unsigned)(s + 0.5);
    snprintf(buf, n, "%u:%02u:%02u", t / 3600, t / 60 % 60, t % 60);
}

void progress_set(struct progress *p, uint64_t done)
{
    p->done = done;
    if (!p->on)
        return;
    double now = cli_now_s();
    if (now - p->drawn_s < 0.2 && !(p->total && done >= p->total))
        return;
    p->drawn_s = now;
    double el = now - p->start_s, rate = el > 0 ? done / el : 0;
    char line[200], spent[16], left[16], per_s[24];
    clock_text(spent, sizeof spent, el);
    snprintf(per_s, sizeof per_s, rate >= 100 ? "%.0f" : "%.3g", rate);
    if (p->total) {
        char bar[21];
        int fill = (int)(20.0 * (done < p->total ? done : p->total) / p->total);
        for (int i = 0; i < 20; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[20] = 0;
        if (rate > 0)
            clock_text(left, sizeof left, (p->total - (done < p->total ? done : p->total)) / rate);
        else
            snprintf(left, sizeof left, "?");
        snprintf(line, sizeof line, "%s [%s] %llu/%llu %s, %s/s, %s spent, %s left", p->what, bar,
                 (unsigned long long)done, (unsigned long long)p->total, p->unit, per_s, spent,
                 left);
    } else {
        snprintf(line, sizeof line, "%s: %llu %s, %s/s, %s spent", p->what,
                 (unsigned long long)done, p->unit, per_s, spent);
    }
    fprintf(stderr, "\r\033[K%s", line);
    fflush(stderr);
    p->drawn = 1;
}

void progress_end(struct progress *p)
{
    if (p->on && p->drawn) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
    p->drawn = 0;
}
