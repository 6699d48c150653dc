#!/bin/bash
# 79 (a node and its buddy lost: tier 2, bitwise) with the model in parts:
# pp 2 x dp 2 x ep 2, the shared steps an index over four parts.
CKPT_LAYOUT="--pp 2 --dp 2 --ep 2" exec bash "$SIGMA_SRCDIR/tests/cluster/79-ckpt-buddy-lost.sh"
