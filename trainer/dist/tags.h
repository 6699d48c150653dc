/*
 * tags.h - the tags of sigma-train's point-to-point messages, all in one
 * enum so that no two exchanges can take each other's messages.
 *
 * MPI matches a receive by communicator, peer and tag; NCCL ignores tags
 * and matches in call order per pair of ranks. The values are in no file
 * and no other program: they only have to differ from each other.
 */
#ifndef SIGMA_TRAIN_TAGS_H
#define SIGMA_TRAIN_TAGS_H

enum sigma_tag {
	/* tier 1 (tier1.c): a rank's staged shard (parameters and both
	 * moments) to its buddy, then its train state */
	SIGMA_TAG_REPLICA_SHARD = 7101,
	SIGMA_TAG_REPLICA_STATE = 7102,
	/* resume from the node-local tier (resume.c), one transfer of the
	 * plan: the source's "the copy is good" flag, then the stage, then
	 * the train state */
	SIGMA_TAG_RESUME_FLAG = 7201,
	SIGMA_TAG_RESUME_STAGE = 7202,
	SIGMA_TAG_RESUME_STATE = 7203,
	/* the pipeline (dist_pipe.c): a stage receives activations only
	 * from the stage before it and gradients only from the one after */
	SIGMA_TAG_PIPE = 7300,
	/* the auto-tuner's link probe (dist.c): to each ring neighbour */
	SIGMA_TAG_PROBE = 7400,
};

#endif /* SIGMA_TRAIN_TAGS_H */
