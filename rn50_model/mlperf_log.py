"""MLPerf Training's log of a time-to-train run: `:::MLLOG` lines through the mlperf-logging
package, written by rank 0 beside the run's record, for the ResNet ruleset its compliance checker
reads; where the package does not import, the record says the log was not written."""
from __future__ import annotations

import functools
import logging
from pathlib import Path

from .config import ConvergenceConfig, TrainConfig
from .startup import Placement

MLPERF_LOG = "mlperf.log"


MLPERF_LOG_MISSING = "not written: mlperf-logging is not installed (pip install mlperf-logging)"


# The compliance checker's training ruleset this log is written for: the last with ResNet rules
# (MLPerf Training dropped ResNet after 4.0; on a later ruleset the checker stops with a
# FileNotFoundError for its open_resnet.yaml).
MLPERF_RULESET = "4.0.0"


MLPERF_ORG = "rn50-perf"     # submission_org: the tool that ran it; nobody submits these runs


# Keys of the checker's ResNet rules (closed_resnet_sgd.yaml) that mllog.constants lacks.
SGD_OPT_BASE_LR = "sgd_opt_base_learning_rate"


SGD_OPT_MOMENTUM = "sgd_opt_momentum"


SGD_OPT_WEIGHT_DECAY = "sgd_opt_weight_decay"


def _written(method):
    """A log method that does nothing without mlperf-logging: the run goes on unlogged."""
    @functools.wraps(method)
    def write_if_open(self, *args, **kwargs):
        if self.mllogger is not None:
            method(self, *args, **kwargs)
    return write_if_open


class MlperfLog:
    """MLPerf's `:::MLLOG` lines into `<run_dir>/mlperf.log`, written by rank 0 only: the keys,
    values and order that MLPerf's compliance checker wants of a ResNet run (training ruleset
    4.0.0, the last with ResNet), a method per block of the run. Every value is the run's own.
    Without the mlperf-logging package the run goes on unlogged, and `not_written` says why."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.mllogger = None
        self.not_written = None
        if path is None:
            return
        try:
            from mlperf_logging.mllog import constants
            from mlperf_logging.mllog.mllog import MLLogger
        except ImportError:
            # Optional (the project's GPU machine lacks it): the log is a by-product of the run.
            self.not_written = MLPERF_LOG_MISSING
            return
        self.names = constants
        logger = logging.getLogger(f"rn50_model.mlperf.{id(self)}")
        logger.propagate = False
        logger.setLevel(logging.INFO)
        self.handler = logging.FileHandler(path, mode="w")
        logger.addHandler(self.handler)
        # Each line's file and lineno name the line of this class that wrote its key.
        self.mllogger = MLLogger(logger=logger, default_stack_offset=2)

    def _event(self, key: str, value=None, **metadata) -> None:
        self.mllogger.event(key=key, value=value, metadata=metadata or None)

    def _start(self, key: str, value=None, **metadata) -> None:
        self.mllogger.start(key=key, value=value, metadata=metadata or None)

    def _end(self, key: str, value=None, **metadata) -> None:
        self.mllogger.end(key=key, value=value, metadata=metadata or None)

    @_written
    def init_start(self) -> None:
        self._start(self.names.INIT_START)

    @_written
    def submission(self, placement: Placement, device) -> None:
        """What ran where, as the checker wants each key once: not an organisation's submission
        but this tool's run, so `research`; `open`, as the recipe's cosine LR and weight decay
        are not what the closed division's ResNet rules allow."""
        from .environment import device_name
        names = self.names
        self._event(names.SUBMISSION_BENCHMARK, names.RESNET)
        self._event(names.SUBMISSION_ORG, MLPERF_ORG)
        self._event(names.SUBMISSION_DIVISION, names.OPEN)
        self._event(names.SUBMISSION_STATUS, names.RESEARCH)
        self._event(names.SUBMISSION_PLATFORM, f"{placement.nodes}x{placement.local_world_size} "
                                               f"{device_name(device)}")
        # MLPerf drops the host's page cache before a run; this suite does not (that needs root).
        self._event(names.CACHE_CLEAR, False)

    @_written
    def init_stop(self, config: TrainConfig, convergence: ConvergenceConfig, optimizer,
                  world_size: int, train_samples: int, eval_samples: int) -> None:
        """The run's settings as the optimizer and the data hold them, then init_stop."""
        names = self.names
        self._event(names.SEED, config.seed)
        self._event(names.GLOBAL_BATCH_SIZE, world_size * config.batch_per_device)
        # BatchNorm's statistics span one device's batch: the model has no SyncBatchNorm.
        self._event(names.MODEL_BN_SPAN, config.batch_per_device)
        self._event(names.GRADIENT_ACCUMULATION_STEPS, 1)  # a step per batch
        self._event(names.OPT_NAME, type(optimizer).__name__.lower())
        self._event(SGD_OPT_BASE_LR, config.learning_rate(world_size))
        self._event(SGD_OPT_MOMENTUM, optimizer.param_groups[0]["momentum"])
        # The decay on conv and linear weights; BN parameters and biases have none.
        self._event(SGD_OPT_WEIGHT_DECAY, max(group["weight_decay"]
                                              for group in optimizer.param_groups))
        self._event(names.OPT_LR_WARMUP_EPOCHS, convergence.warmup_epochs)
        self._event(names.OPT_LR_DECAY_SCHEDULE, "cosine")  # learning_rate()
        self._event(names.TRAIN_SAMPLES, train_samples)
        self._event(names.EVAL_SAMPLES, eval_samples)
        self._end(names.INIT_STOP)

    @_written
    def run_start(self) -> None:
        self._start(self.names.RUN_START)

    @_written
    def epoch_start(self, epoch: int) -> None:
        """A block of one epoch (numbered from 1, as MLPerf does) and its training start."""
        self._start(self.names.BLOCK_START, first_epoch_num=epoch, epoch_count=1)
        self._start(self.names.EPOCH_START, epoch_num=epoch)

    @_written
    def epoch_trained(self, epoch: int) -> None:
        self._end(self.names.EPOCH_STOP, epoch_num=epoch)
        self._start(self.names.EVAL_START, epoch_num=epoch)

    @_written
    def evaluated(self, epoch: int, top1: float) -> None:
        self._event(self.names.EVAL_ACCURACY, top1, epoch_num=epoch)
        self._end(self.names.EVAL_STOP, epoch_num=epoch)
        self._end(self.names.BLOCK_STOP, first_epoch_num=epoch)

    @_written
    def run_stop(self, reached_target: bool) -> None:
        names = self.names
        self._end(names.RUN_STOP, status=names.SUCCESS if reached_target else names.ABORTED)
        self.handler.close()
