/*
 * select.h - pick the op table for a device name (sigma-train --device).
 */
#ifndef SIGMA_KERNELS_SELECT_H
#define SIGMA_KERNELS_SELECT_H

#include <stddef.h>

#include "ops.h"

/*
 * The op table for device:
 *   "cpu"                    sigma_ops_cpu
 *   "cuda" or "cuda:fp32"    sigma_ops_cuda, fp32 matrix products
 *   "cuda:bf16"              sigma_ops_cuda, bf16 inputs, fp32 accumulation
 * NULL with a message in err (bounded by errlen) for an unknown name, a
 * build without the CUDA path, or no usable CUDA device. The table is not
 * initialised: call its init next. Selecting a CUDA precision changes the
 * CUDA table's setting for the whole process.
 */
const struct sigma_ops *sigma_ops_select(const char *device, char *err,
					 size_t errlen);

/*
 * The node-local rank of this process from the job's bootstrap
 * (trainer/comm/boot.h; -1: none known), by which a device table's init
 * chooses among several visible devices. Call before init.
 */
void sigma_ops_set_local_rank(int local_rank);

/*
 * The bf16 forward-product table (kernels/bf16.h) that goes with ops:
 * sigma_bf16_cpu for the CPU table, sigma_bf16_cuda for the CUDA table,
 * NULL for anything else (NULL included).
 */
struct sigma_bf16;
const struct sigma_bf16 *sigma_bf16_select(const struct sigma_ops *ops);

/*
 * The device index (as CUDA numbers the visible devices) on which ops's
 * init placed this process: -1 for the CPU table, or before init.
 */
int sigma_ops_device(const struct sigma_ops *ops);
/* The physical identity of that device (a PCI address) in buf; 0, or
 * -ENODEV for the CPU table or before init. */
int sigma_ops_device_id(const struct sigma_ops *ops, char *buf, size_t len);
#endif /* SIGMA_KERNELS_SELECT_H */
