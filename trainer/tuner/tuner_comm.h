/*
 * tuner_comm.h - the auto-tuner's third rung (docs/tuner.md): the
 * gradient buckets. Where the backward pass overlaps the gradient's
 * all-reduce with its own compute (one stage, one micro-batch, moments
 * not split: dist_bucket_span), the gradient leaves in buckets of at
 * least --grad-bucket-mb as its layers finish, one bucket in flight at a
 * time, and what is left goes after the pass. Small buckets start sooner
 * and hide more of the transfer; each costs the all-reduce's fixed time
 * once more. One bucket as large as the gradient is no overlap at all.
 *
 * The cost model: buckets of b bytes of a gradient of S bytes become
 * due evenly over the backward pass's time; each takes lat + b x byte_ns.
 * When one is due the rank waits for the one before, then starts it; the
 * back end moves the part `overlap` of a started bucket while the rank
 * computes, and the rest only while the rank waits (an MPI without a
 * progress thread moves little in the background, NCCL on its own stream
 * all of it). What the step loses is the time from the end of the pass
 * to the last bucket's arrival (tuner_comm_exposed).
 *
 * lat and byte_ns are measured by a probe (dist_bucket_probe), overlap
 * from the buckets in force: 1 - the time the ranks waited for them over
 * their time by the probe's figures. With one bucket there is nothing to
 * see, and none is counted on: the tuner then only makes buckets larger.
 * So a link that is late per message leads to few large buckets, and a
 * slow transfer that a back end has been seen to move during the pass
 * to small ones.
 *
 * Pure: no communication, no model.
 */
#ifndef SIGMA_TRAIN_TUNER_COMM_H
#define SIGMA_TRAIN_TUNER_COMM_H

/* a new bucket size must cut the predicted wait by this fraction of the
 * job's step time (5%) */
#define TUNER_COMM_GAIN 0.05
/* a larger bucket within this fraction of the least wait is taken:
 * fewer messages for the same wait (2%) */
#define TUNER_COMM_NEAR 0.02
/* the smallest bucket tried (floats: 64 KiB) */
#define TUNER_COMM_MIN ((long)16 << 10)
/* the probe's large all-reduce, at most (floats: 4 MiB) */
#define TUNER_PROBE_FLOATS ((long)1 << 20)

/* what the choice is made from, the job's: the slowest rank's */
struct tuner_comm_in {
	double grad_floats; /* S: the gradient that leaves in buckets */
	double backward_ns; /* the backward pass's time per step */
	double lat_ns;	    /* an all-reduce of one float */
	double byte_ns;	    /* its time per byte beyond that */
	double overlap;	    /* the part moved while the rank computes */
	/* only sizes in (lo, hi) are chosen (0: no bound): those a trial
	 * took back are not tried again */
	long lo, hi;
};

/* the predicted wait after the backward pass for buckets of b floats */
double tuner_comm_exposed(const struct tuner_comm_in *in, long b);

/*
 * The bucket size, in floats, whose predicted wait is least: powers of
 * two from TUNER_COMM_MIN below S, and S itself (no overlap), in (lo,
 * hi); of those within TUNER_COMM_NEAR of the least, the largest. *wait
 * its predicted wait. 0 when no size is in (lo, hi).
 */
long tuner_comm_best(const struct tuner_comm_in *in, double *wait);

#endif /* SIGMA_TRAIN_TUNER_COMM_H */
