/*
 * resume_table.h - what the ranks of a resuming job hold, as the restore
 * planner sees it (resume_table.c): each rank lists its node's tier-1
 * copies (rank 0 the shared tier too) as fixed-size records, every rank
 * gets every rank's, and the records become the planner's input
 * (restore.h). Internal to resume.c.
 */
#ifndef SIGMA_TRAIN_RESUME_TABLE_H
#define SIGMA_TRAIN_RESUME_TABLE_H

#include <limits.h>
#include <stdint.h>

#include "dist.h"
#include "restore.h"
#include "resume.h"

#define PER_DIR	  16  /* newest names listed per directory */
#define MAX_REC	  128 /* records per rank */
/* records a rank lists: one more is kept for a shared checkpoint that a
 * read found older than the plan's (shared_settle) */
#define LISTED	  (MAX_REC - 1)

/* a record's flags */
enum {
	F_USED = 1,
	F_REPLICA = 2,
	F_LAYOUT = 4, /* written by this job's layout */
	F_BAD = 8,
	F_SHARED = 16, /* a file of the shared tier (rank 0) */
};

/* one line of the table, as it travels */
struct rec {
	int64_t shard, step, attempt, flags;
};

/* a record of this rank's and the file it names */
struct local {
	struct rec r;
	char path[PATH_MAX];
};

/* the planner's input (restore.h), and where each entry came from */
struct table {
	struct restore_copy *copies;
	int *cowner, *cidx; /* rank and its record of each copy */
	struct restore_shared *shared;
	int *sidx; /* rank 0's record of each shared checkpoint */
	int ncopies, nshared;
};

/*
 * What this rank can read: its node's directories (a->node_dir; none
 * when NULL) and, on rank 0, the shared one. Up to LISTED records into
 * loc, *n of them; *shared_newest the newest step the shared tier names
 * (-1 none).
 */
void resume_list(const struct dist *d, const struct resume_args *a,
		 struct local *loc, int *n, long *shared_newest);
/* every rank's records to every rank: all[size * MAX_REC]; 0 or -errno */
int resume_exchange(struct dist *d, const struct local *loc, int n,
		    struct rec *all);
/* the planner's input from every rank's records: 0 or -ENOMEM */
int resume_table_build(const struct dist *d, const struct rec *all,
		       struct table *t);
void resume_table_free(struct table *t);
/* the newest attempt any record names, -1 none */
int resume_max_attempt(const struct dist *d, const struct rec *all);

#endif /* SIGMA_TRAIN_RESUME_TABLE_H */
