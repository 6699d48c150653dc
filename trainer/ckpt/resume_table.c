/*
 * resume_table.c - what the ranks of a resuming job hold
 * (resume_table.h): every rank lists the rank-R and replica-R directories
 * of its node (all of them, whatever rank wrote them: a new placement may
 * put rank R on the node that holds another rank's copies) and peeks at
 * each file's header; rank 0 lists the shared directory by name. The
 * records go to every rank in one all-gather, and become the table the
 * planner reads.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "ckpt.h"
#include "claim.h"
#include "resume_table.h"

/* "rank-12" or "replica-3": the shard, else -1 */
static long dir_shard(const char *name, bool *replica)
{
	const char *n = NULL;
	long v;

	if (!strncmp(name, "rank-", 5))
		n = name + 5, *replica = false;
	else if (!strncmp(name, "replica-", 8))
		n = name + 8, *replica = true;
	if (!n || sigma_parse_long(n, 0, RESTORE_MAX_RANKS - 1, &v))
		return -1;
	return v;
}

static void add_dir(const char *dir, long shard, int flags,
		    const struct resume_args *a, struct local *loc, int *n)
{
	struct ckpt_entry e[PER_DIR];
	int k;

	/* a node-local directory of another run (or of none) is not ours */
	if (!(flags & F_SHARED) && a->run && *a->run &&
	    !claim_holds(dir, a->run))
		return;
	k = ckpt_list(dir, e, PER_DIR);

	for (int i = 0; i < k && *n < LISTED; i++) {
		struct local *l = &loc[*n];
		struct ckpt_state ps;
		char why[1024];

		if (ckpt_path(l->path, sizeof(l->path), dir, e[i].step,
			      e[i].attempt))
			continue;
		l->r = (struct rec){shard, e[i].step, e[i].attempt,
				    F_USED | flags};
		if (!(flags & F_SHARED)) {
			/* the header only: the data are verified by the
			 * rank that reads the copy for the plan */
			if (ckpt_peek(l->path, &ps, why, sizeof(why))) {
				sigma_warn("resume: %s", why);
				l->r.flags |= F_BAD;
			} else if (ps.step != e[i].step ||
				   ps.attempt != e[i].attempt) {
				sigma_warn(
				    "resume: %s holds step %ld of attempt %d, its name says otherwise",
				    l->path, ps.step, ps.attempt);
				l->r.flags |= F_BAD;
			} else if (a->run && *a->run && strcmp(ps.run, a->run)) {
				sigma_warn("resume: %s belongs to run %s, not %s",
					   l->path, *ps.run ? ps.run : "(none)",
					   a->run);
				l->r.flags |= F_BAD;
			} else if (!strcmp(ps.layout, a->layout)) {
				l->r.flags |= F_LAYOUT;
			}
		}
		(*n)++;
	}
}

/* what this rank can read: its node's directories, and rank 0 the
 * shared one */
void resume_list(const struct dist *d, const struct resume_args *a,
		      struct local *loc, int *n, long *shared_newest)
{
	/* with tier 1 off, nothing: the plan is the shared tier's */
	DIR *dh = a->node_dir ? opendir(a->node_dir) : NULL;
	struct dirent *de;

	*n = 0;
	*shared_newest = -1;
	if (dh) {
		while ((de = readdir(dh))) {
			char dir[PATH_MAX];
			bool replica = false;
			long shard = dir_shard(de->d_name, &replica);

			if (shard < 0 ||
			    sigma_snprintf(dir, sizeof(dir), "%s/%s",
					   a->node_dir, de->d_name))
				continue;
			add_dir(dir, shard, replica ? F_REPLICA : 0, a, loc,
				n);
		}
		closedir(dh);
	}
	if (d->rank == 0 && a->shared_dir && *a->shared_dir) {
		int att = 0, da = -1;
		long ds = ckpt_diff_newest(a->shared_dir, &da);

		*shared_newest = ckpt_newest(a->shared_dir, &att);
		add_dir(a->shared_dir, 0, F_SHARED, a, loc, n);
		/* the newest differential, when newer in (attempt, step)
		 * order than the newest full one (or there is none, which
		 * the read then says): the shared read takes base and
		 * differential */
		if (ds >= 0 &&
		    (*shared_newest < 0 || da > att ||
		     (da == att && ds > *shared_newest)) &&
		    *n < LISTED) {
			loc[*n].r = (struct rec){0, ds, da, F_USED | F_SHARED};
			sigma_strlcpy(loc[*n].path, a->shared_dir,
				      sizeof(loc[*n].path));
			(*n)++;
			*shared_newest = ds;
		}
	}
}

/* every rank's records to every rank: all[size * MAX_REC] */
int resume_exchange(struct dist *d, const struct local *loc, int n,
		    struct rec *all)
{
	struct rec *mine = calloc(MAX_REC, sizeof(*mine));
	int rc;

	if (!mine)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		mine[i] = loc[i].r;
	rc = dist_allgather(d, mine, sizeof(*mine) * MAX_REC, all);
	free(mine);
	return rc;
}

void resume_table_free(struct table *t)
{
	free(t->copies), free(t->cowner), free(t->cidx);
	free(t->shared), free(t->sidx);
	memset(t, 0, sizeof(*t));
}

int resume_table_build(const struct dist *d, const struct rec *all,
		       struct table *t)
{
	size_t max = (size_t)d->size * MAX_REC;

	memset(t, 0, sizeof(*t));
	t->copies = calloc(max, sizeof(*t->copies));
	t->cowner = calloc(max, sizeof(int));
	t->cidx = calloc(max, sizeof(int));
	t->shared = calloc(MAX_REC, sizeof(*t->shared));
	t->sidx = calloc(MAX_REC, sizeof(int));
	if (!t->copies || !t->cowner || !t->cidx || !t->shared || !t->sidx) {
		resume_table_free(t);
		return -ENOMEM;
	}
	for (int p = 0; p < d->size; p++) {
		for (int i = 0; i < MAX_REC; i++) {
			const struct rec *r = &all[(size_t)p * MAX_REC + i];

			if (!(r->flags & F_USED) || r->step < 0 ||
			    r->step > LONG_MAX || r->attempt < 0 ||
			    r->attempt > CKPT_ATTEMPT_MAX || r->shard < 0 ||
			    r->shard >= RESTORE_MAX_RANKS)
				continue;
			if (r->flags & F_SHARED) {
				if (p != 0 || t->nshared >= MAX_REC)
					continue;
				t->shared[t->nshared] = (struct restore_shared){
				    (long)r->step, (int)r->attempt,
				    (r->flags & F_BAD) != 0};
				t->sidx[t->nshared++] = i;
				continue;
			}
			t->copies[t->ncopies] = (struct restore_copy){
			    .holder = p,
			    .shard = (int)r->shard,
			    .step = (long)r->step,
			    .attempt = (int)r->attempt,
			    .replica = (r->flags & F_REPLICA) != 0,
			    /* a shard this job does not have: another
			     * layout whatever the header says */
			    .same_layout =
				(r->flags & F_LAYOUT) && r->shard < d->size,
			    .bad = (r->flags & F_BAD) != 0,
			};
			t->cowner[t->ncopies] = p;
			t->cidx[t->ncopies++] = i;
		}
	}
	return 0;
}

/* the newest attempt any copy of the run names, -1 none */
int resume_max_attempt(const struct dist *d, const struct rec *all)
{
	int mx = -1;

	for (size_t i = 0; i < (size_t)d->size * MAX_REC; i++)
		if ((all[i].flags & F_USED) && all[i].attempt > mx &&
		    all[i].attempt <= CKPT_ATTEMPT_MAX)
			mx = (int)all[i].attempt;
	return mx;
}

