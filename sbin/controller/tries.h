/*
 * tries.h - the nodes in repair: for each, the repair probes tried and the
 * one running now. A table sorted by node name that grows with the nodes
 * in repair and drops each one back in service, so that any number of
 * distinct nodes can pass through repair over sigmad's life.
 */
#ifndef SIGMAD_TRIES_H
#define SIGMAD_TRIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proc.h"
#include "view.h"

struct ctl_tries {
	char node[CTL_NAME_MAX];
	int tries;
	int64_t last;
	struct ctl_proc probe; /* the repair probe running now, if any */
	bool done;	       /* it has ended: rc and out wait */
	int rc;
	char out[CTL_PROC_OUT_MAX];
};

struct ctl_tries_table {
	struct ctl_tries **v; /* sorted by node */
	size_t n, cap;
};

/* node's entry, or NULL when it has none */
struct ctl_tries *ctl_tries_find(const struct ctl_tries_table *t,
				 const char *node);
/*
 * node's entry, made (zeroed) when it has none; NULL only when memory runs
 * out. An entry stays where it is until node is dropped.
 */
struct ctl_tries *ctl_tries_get(struct ctl_tries_table *t, const char *node);
/* forget node (its probe must not run any more); none is fine */
void ctl_tries_drop(struct ctl_tries_table *t, const char *node);
void ctl_tries_free(struct ctl_tries_table *t);

#endif /* SIGMAD_TRIES_H */
