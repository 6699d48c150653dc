#!/bin/bash
# 78 (a lost node, its ranks' tier-1 copies from their buddies' replicas,
# bitwise) with the model in parts: pp 2 x dp 2 x ep 2, so that every rank
# holds, writes and restores a part of its own, and the replica that saves
# rank 3 is a part of another stage's shape than its keeper's; the AdamW
# moments are split (--zero 1), so the copies hold moments gathered from
# the stage's ranks.
CKPT_LAYOUT="--pp 2 --dp 2 --ep 2 --zero 1" exec bash "$SIGMA_SRCDIR/tests/cluster/78-ckpt-node-replaced.sh"
