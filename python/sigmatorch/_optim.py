"""Calls around an optimizer's step(), on every PyTorch sigmatorch runs
on: Snapshot's fence before it (the step changes what a snapshot
copies), Run's learning-rate factor around it."""
import types


def around_step(optimizer, before, after=None):
    """Call before() and after() (if any) around each optimizer.step(): through
    the optimizer's step hooks (PyTorch 2.0 and later), else by wrapping
    the instance's step, bound to it as PyTorch's LR schedulers expect of
    it (1.13, Debian 12's)."""
    if hasattr(optimizer, "register_step_pre_hook"):
        optimizer.register_step_pre_hook(lambda opt, args, kwargs: before())
        if after is not None:
            optimizer.register_step_post_hook(
                lambda opt, args, kwargs: after())
        return
    step = optimizer.step

    def stepped(self, *args, **kwargs):
        before()
        try:
            return step(*args, **kwargs)
        finally:
            if after is not None:
                after()

    # an LR scheduler's counting wrapper stays inside: say it is there, as
    # the scheduler checks at its first step (else it warns of a step
    # overridden after it)
    if getattr(step, "_with_counter", False):
        stepped._with_counter = True
    optimizer.step = types.MethodType(stepped, optimizer)
