/*
 * train_cli.h - what the tests that run trainer/sigma-train as a program
 * share: a scratch directory with a small text corpus to learn, and a runner
 * for command lines in it whose output goes to train_cli_dir/out.
 */
#ifndef TRAIN_CLI_H
#define TRAIN_CLI_H

#include <limits.h>
#include <stdbool.h>

#include "sigma.h"

extern char train_cli_dir[64];        /* the scratch directory */
extern char train_cli_prog[PATH_MAX]; /* $top_builddir/trainer/sigma-train */

/*
 * Make the scratch directory from tmpl ("/tmp/NAME.XXXXXX") with text.txt
 * in it, and find sigma-train. 0 or -1 (cmocka group setup).
 */
int train_cli_setup(const char *tmpl);
/* train_cli_setup, then train.tok and val.tok prepared from text.txt. */
int train_cli_setup_tokens(const char *tmpl);
/* cmocka group teardown: train_cli_teardown. */
int train_cli_group_teardown(void **state);
/* Remove the scratch directory. 0 or -1. */
int train_cli_teardown(void);
/* Run a shell command line in the directory, output to out; exit status. */
int train_cli_run(const char *fmt, ...) SIGMA_PRINTF(1, 2);
/* A file of the directory, whole (the caller frees it). */
char *train_cli_slurp(const char *name);
/* Whether out holds what (printing out when not). */
bool train_cli_out_has(const char *what);

#endif /* TRAIN_CLI_H */
