/* Whole-or-nothing output files (contract in outfile.h). The only file
 * types ever written or replaced are regular files; the checks use lstat so
 * a link is judged as itself, not as what it points to. */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What st is when it is not a regular file, for messages; NULL when it is. */
static const char *not_regular(const struct stat *st)
{
    if (S_ISREG(st->st_mode))
        return NULL;
    return S_ISLNK(st->st_mode)    ? "a symbolic link"
           : S_ISFIFO(st->st_mode) ? "a FIFO"
           : S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode) ? "a device node"
           : S_ISDIR(st->st_mode)  ? "a directory"
           : S_ISSOCK(st->st_mode) ? "a socket"
                                   : "not a regular file";
}

/* 0 when path is absent or a regular file, else an error naming it. */
static int may_replace(const char *path, const char *what, struct alisa_err *e)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : err_set(e, ALISA_EIO, "%s: cannot inspect%s%s: %s", path,
                                             *what ? " " : "", what, strerror(errno));
    const char *kind = not_regular(&st);
    return kind ? err_set(e, ALISA_EIO, "%s: is %s; refusing to replace it with the%s%s (give "
                          "a path to a regular file, or - for standard output)", path, kind,
                          *what ? " " : "", *what ? what : "output")
                : 0;
}

FILE *outfile_open(const char *path, char *part, size_t size, const char *what,
                   struct alisa_err *e)
{
    if (strcmp(path, "-") == 0) {
        if (size)
            part[0] = 0;
        return stdout;
    }
    int n = snprintf(part, size, "%s.part", path);
    if (n < 0 || (size_t)n >= size) {
        err_set(e, ALISA_EINVAL, "%s: path too long", path);
        return NULL;
    }
    if (may_replace(path, what, e) || may_replace(part, what, e))
        return NULL;
    unlink(part); /* a stale part of a run that was killed: a regular file */
    int fd = open(part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        err_set(e, ALISA_EIO, "%s: cannot create%s%s: %s", part, *what ? " " : "", what,
                strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(part);
        }
    }
    return f;
}

int outfile_close(FILE *f, const char *part, const char *path, int failed, struct alisa_err *e)
{
    if (!part[0]) { /* standard output */
        int bad = fflush(f) != 0 || ferror(f);
        if (failed)
            return failed;
        return bad ? err_set(e, ALISA_EIO, "standard output: write failed") : 0;
    }
    int bad = ferror(f);
    int rc = fclose(f) != 0 || bad;
    if (failed)
        rc = failed;
    else if (rc)
        rc = err_set(e, ALISA_EIO, "%s: write failed", part);
    else if ((rc = may_replace(path, "", e)) == 0 && rename(part, path) != 0)
        rc = err_set(e, ALISA_EIO, "%s: cannot rename to %s: %s", part, path, strerror(errno));
    if (rc)
        unlink(part);
    return rc;
}
