"""sigmatorch: sigma's runtime for PyTorch training loops under Slurm.

The job protocol (docs/job-protocol.md) that sigma-train follows, for any
training script: sigma-launch then relaunches a failed step in the
allocation, tells the node of a crashed rank from its peers, notices a
stalled step, and sigmad's warning (SIGUSR1) becomes a checkpoint and a
requeue. Guard takes sigma-train's guardrails' decisions (skip, lower the
learning rate, roll back, give up) over a loop's loss and gradient norm;
Straggler finds the slow ranks and reports a node that stays slow;
Checkpoint writes a rank's tensors to the node-local tier every step,
in the background, and reads them back on resume; Snapshot does so for a
model, its optimizer, scheduler and RNG states, bit for bit. Run puts
them all around one loop.
Built on libsigma-runtime (sigma_runtime.h).
"""
from .job import (EXIT_DIVERGED, EXIT_FAILURE, EXIT_HARDWARE, EXIT_OK,
                  EXIT_PEER, EXIT_REQUEUE, Job)
from .guard import Decision, Guard
from .straggler import Straggler
from .checkpoint import Checkpoint, Shard
from .snapshot import Snapshot
from .run import Run

__all__ = ["Job", "Guard", "Decision", "Straggler", "Checkpoint", "Shard",
           "Snapshot", "Run", "EXIT_OK", "EXIT_FAILURE", "EXIT_DIVERGED",
           "EXIT_REQUEUE", "EXIT_PEER", "EXIT_HARDWARE"]
