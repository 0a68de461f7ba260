/* Regular input files only (contract in infile.h). */
#include "infile.h"

#include <fcntl.h>
#include <unistd.h>

static int not_regular(const char *path, const char *what, mode_t mode, struct alisa_err *e)
{
    const char *kind = S_ISFIFO(mode) ? "a FIFO" : S_ISDIR(mode) ? "a directory"
                       : S_ISCHR(mode) || S_ISBLK(mode) ? "a device" : S_ISSOCK(mode) ? "a socket"
                                                                             : "another kind";
    return err_set(e, ALISA_EIO, "%s: not a regular file (%s), refused as %s", path, kind, what);
}

int infile_open(const char *path, const char *what, struct stat *sb, struct alisa_err *e)
{
    if (stat(path, sb) == 0 && !S_ISREG(sb->st_mode))
        return not_regular(path, what, sb->st_mode, e);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || fstat(fd, sb) != 0) {
        if (fd >= 0)
            close(fd);
        return err_set(e, ALISA_EIO, "%s: cannot open %s", path, what);
    }
    if (!S_ISREG(sb->st_mode)) {
        close(fd);
        return not_regular(path, what, sb->st_mode, e);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK); /* reads of a regular file never block anyway */
    return fd;
}

FILE *infile_fopen(const char *path, const char *what, struct alisa_err *e)
{
    struct stat sb;
    int fd = infile_open(path, what, &sb, e);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        err_set(e, ALISA_EIO, "%s: cannot open %s", path, what);
    }
    return f;
}
