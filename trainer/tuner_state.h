/*
 * tuner_state.h - what a checkpoint keeps of the auto-tuner (its /tuner
 * group, docs/checkpoint-format.md): the data-parallel shares in force and
 * the decisions that led to them, the experts' moves (tuner_place.h) and
 * the gradient buckets (tuner_comm.h), so that a resumed run goes on with
 * the same shares, placement and buckets. A plain struct of values, as
 * guard_state.h: the tuner (tuner.h) fills it and takes it back, the
 * checkpoint writes and reads it.
 */
#ifndef SIGMA_TRAIN_TUNER_STATE_H
#define SIGMA_TRAIN_TUNER_STATE_H

/* the most data-parallel ranks whose shares a checkpoint holds */
#define TUNER_MAX_DP 1024
/* the decisions a checkpoint keeps: the newest that fit */
#define TUNER_LOG_MAX 2048
/* the experts' swaps a run may make: the placement is the layout's,
 * then every swap of the run in order, so none is dropped (about 700) */
#define TUNER_MOVES_MAX 8192

struct tuner_state {
	int n; /* shares held (the data-parallel ranks); 0: equal shares */
	/* sequences per micro-batch of each data-parallel rank */
	int shares[TUNER_MAX_DP];
	/* the decisions, oldest first: "STEP:a,b,...;" each */
	char log[TUNER_LOG_MAX];
	/* every expert swap since the run began, oldest first: "L:A-B;"
	 * each (empty: the layout's placement) */
	char moves[TUNER_MOVES_MAX];
	/* floats per gradient bucket the tuner chose (0: the options') */
	long bucket;
};

#endif /* SIGMA_TRAIN_TUNER_STATE_H */
