/*
 * rollback.h - the guard's rollback carried out (docs/guardrails.md): the
 * model reloaded from the newest valid checkpoint, then the guard told, so
 * that the guard itself (guard.h) stays free of checkpoints and files.
 */
#ifndef SIGMA_TRAIN_ROLLBACK_H
#define SIGMA_TRAIN_ROLLBACK_H

struct guard_run;

/*
 * Roll r's model back to the newest valid checkpoint of dir
 * (ckpt_load_latest) at step; the steps since the trouble began are
 * skipped (guard_rolled_back). Says what it did, or why it could not.
 * Returns the checkpoint's step, or -1.
 */
long rollback_to_latest(struct guard_run *r, const char *dir, long step);

#endif /* SIGMA_TRAIN_ROLLBACK_H */
