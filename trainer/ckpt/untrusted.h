/*
 * untrusted.h - --init-from-untrusted: the weights of a checkpoint from
 * elsewhere (no seal: not written by sigma, or not known to be), parsed in
 * a child process, so that what libhdf5 does with hostile bytes stays
 * there. See docs/checkpoint-format.md, "Files from elsewhere".
 */
#ifndef SIGMA_TRAIN_UNTRUSTED_H
#define SIGMA_TRAIN_UNTRUSTED_H

#include <stddef.h>

struct model;

/*
 * Read the weights of path into m (moments zeroed), as ckpt_read_weights
 * does, but in a forked child: it parses the file with glibc's heap
 * perturbation and checks on (mallopt M_PERTURB, M_CHECK_ACTION), no core
 * file, no file writes, at most UNTRUSTED_CPU_S seconds of CPU, and hands
 * back only the weights, through a shared mapping, once its reader took
 * them. A child that dies (a signal) or says no leaves m untouched. 0, or
 * -EBADMSG / -errno with err saying why.
 */
int untrusted_read_weights(const char *path, struct model *m, char *err,
			   size_t len);

#define UNTRUSTED_CPU_S 600

#endif /* SIGMA_TRAIN_UNTRUSTED_H */
