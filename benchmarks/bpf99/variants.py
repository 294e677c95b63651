from functools import partial
import ab
VARIANTS = {
    "bpf": partial(ab.run_bpf, hz=99),
    "bpf-quiet": partial(ab.run_bpf, hz=99, rescan=1e9, poll=1.0),
    "bpf-nostats": partial(ab.run_bpf, hz=99, stats="0"),
    "perf": partial(ab.run_perf, hz=99),
    "perf-samples": partial(ab.run_perf, hz=99, stacks=False),
    "none": ab.run_none,
}
VARIANTS["bpf-busy"] = partial(ab.run_bpf, hz=99, rescan=0.05, poll=0.01)
VARIANTS["bpf-poll10"] = partial(ab.run_bpf, hz=99, rescan=1e9, poll=0.01)
import os
def with_env(name, fn):
    def run(**kw):
        os.environ[name] = "1"
        try:
            return fn(**kw)
        finally:
            del os.environ[name]
    return run
VARIANTS["bpf-percpu"] = with_env("FU_EXPERIMENT_PER_CPU", partial(ab.run_bpf, hz=99))
VARIANTS["bpf-nowalk"] = with_env("FU_EXPERIMENT_NOWALK", partial(ab.run_bpf, hz=99))
VARIANTS["perf-samples"] = partial(ab.run_perf, hz=99, stacks=False)
def same_cpu(fn):
    """The recorder (this thread, and the threads it starts) SCHED_FIFO 20 on the target's CPU (AB_RT): it
    preempts the target (SCHED_FIFO 10) at each wake."""
    def run(**kw):
        cpu = int(os.environ["AB_RT"])
        saved = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {cpu})
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(20))
        try:
            return fn(**kw)
        finally:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            os.sched_setaffinity(0, saved)
    return run
VARIANTS["bpf-same"] = same_cpu(partial(ab.run_bpf, hz=99))
VARIANTS["bpf-busy-same"] = same_cpu(partial(ab.run_bpf, hz=99, rescan=0.05, poll=0.01))
VARIANTS["perf-same"] = same_cpu(partial(ab.run_perf, hz=99))
