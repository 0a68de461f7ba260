/* Opening the executor's input files (checkpoints, tokenizers, texts) so
 * that only a regular file is ever read: a FIFO's open waits for a writer
 * and a device may answer forever or act on being opened (issue 48: a FIFO
 * named as a model hung the loader). The traces' reader (sim/trace/trace.c)
 * keeps the same rule below the executor's layer.
 */
#ifndef ALISA_INFILE_H
#define ALISA_INFILE_H

#include <stdio.h>
#include <sys/stat.h>

#include "err.h"

/* A read-only descriptor of path, or a negative status with e set: "PATH:
 * cannot open WHAT" when it cannot be opened, "PATH: not a regular file (a
 * FIFO), refused as WHAT" when it is not a regular file. The stat refuses
 * those without opening them; the open cannot block (O_NONBLOCK, cleared
 * again) and its fstat is the check that counts. *sb gets the file's
 * status. The caller closes the descriptor. */
int infile_open(const char *path, const char *what, struct stat *sb, struct alisa_err *e);

/* infile_open as a stdio stream ("rb"); NULL with e set. */
FILE *infile_fopen(const char *path, const char *what, struct alisa_err *e);

#endif
