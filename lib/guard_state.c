/*
 * guard_state.c - the guard's saved state (guard_state.h): the names its
 * values have in a checkpoint. The guard moves its counters and windows
 * into and out of it (guard.c, guard_state_export and _import).
 */

#include "guard_state.h"

static const char *const state_names[GUARD_STATE_N] = {
    "lr_until",
    "skip_lo",
    "skip_hi",
    "rollbacks",
    "overflow_outputs",
    "last_trouble",
    /* causes, in enum guard_cause order */
    "cause_none",
    "cause_nonfinite",
    "cause_loss_spike",
    "cause_gnorm_spike",
    "cause_overflow",
    "cause_collapse",
    "cause_hardware",
    "cause_restore",
    "cause_data",
    /* actions, in bit order */
    "action_recompute",
    "action_skip",
    "action_fp32",
    "action_lower_lr",
    "action_rollback",
    "action_requeue",
    "action_stop",
    "action_bf16",
};

static const char *const window_names[GUARD_STATE_WINDOWS] = {
    "window_loss", "window_gnorm", "window_imbalance"};

const char *guard_state_name(int i)
{
	return i >= 0 && i < GUARD_STATE_N ? state_names[i] : "?";
}

const char *guard_state_window_name(int i)
{
	return i >= 0 && i < GUARD_STATE_WINDOWS ? window_names[i] : "?";
}
