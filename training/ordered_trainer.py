"""transformers' ``Trainer`` on a batch order of our own (the NLI and DAE trainers).

Those two trainers were hand-written loops, and their data order is part of
their recipe: seeded batches of similar length, rebuilt each epoch. Here the
Trainer runs on exactly those batches:

* :class:`EpochBatches` yields each epoch's batches (lists of example
  indices) from a ``plan(epoch)`` function, the one the old loop called;
* :class:`OrderedTrainer` feeds them through a DataLoader that neither
  shuffles nor draws from the global torch RNG, takes the model's own batch
  mean as the loss, and carries the torch RNG stream on from where the
  caller left it (``Trainer.__init__`` reseeds; the old loops did not), so
  the dropout masks, the losses and the weights match the old loops' on CPU;
* :class:`EveryNSteps` runs functions every N steps before the last
  (midway checkpoints, dev scores), as the old loops did.

The time budget is :class:`d2t_metrics.generator.TimeBudget`, the callback
the other trainers use.
"""

from __future__ import annotations

import time
from typing import Callable, List, Optional, TextIO, Tuple

import torch
import transformers
from torch.utils.data import DataLoader, Sampler

BatchPlan = Callable[[int], List[List[int]]]


class EpochBatches(Sampler):
    """The batches of epoch 0, 1, 2, ... from ``plan(epoch)``, one epoch per pass.

    ``plan`` runs when a pass yields its first batch, not before, so a plan
    that draws from a shared ``random.Random`` draws exactly when the old
    loop did."""

    def __init__(self, plan: BatchPlan, num_batches: int):
        self.plan = plan
        self.num_batches = num_batches
        self.epoch = 0

    def __iter__(self):
        epoch = self.epoch
        self.epoch += 1
        yield from self.plan(epoch)

    def __len__(self) -> int:
        return self.num_batches


def _torch_rng_state():
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    return torch.get_rng_state(), cuda


def _set_torch_rng_state(state) -> None:
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


class OrderedTrainer(transformers.Trainer):
    """A ``Trainer`` that trains on ``batches`` in their order (see the module docstring).

    ``train_dataset`` is indexable by the plan's indices, ``data_collator``
    turns a list of its items into the model's inputs, and ``optimizers``
    should be given (the old recipes' optimizer and schedule). Progress lines
    go to ``log_to`` (default: standard output)."""

    def __init__(self, *args, batches: EpochBatches, log_to: Optional[TextIO] = None, **kwargs):
        self.batches = batches
        # taken before Trainer.__init__ reseeds the global RNGs, restored when training starts
        self._rng_state = _torch_rng_state()
        super().__init__(*args, **kwargs)
        # the loss is the model's batch mean, as in the old loops (not a sum over an item count)
        self.model_accepts_loss_kwargs = False
        # one progress line per log, to the stream the old loop wrote to (a trainer's stdout may be its result)
        self.remove_callback(transformers.PrinterCallback)
        self.add_callback(ProgressLines(log_to))

    def get_train_dataloader(self) -> DataLoader:
        # its own generator: a DataLoader draws a base seed per pass, which would shift the global stream
        return DataLoader(self.train_dataset, batch_sampler=self.batches, collate_fn=self.data_collator,
                          num_workers=0, generator=torch.Generator())

    def train(self, *args, **kwargs):
        _set_torch_rng_state(self._rng_state)
        return super().train(*args, **kwargs)


class EveryNSteps(transformers.TrainerCallback):
    """After every optimizer step that is not the last, calls each ``fn(step)`` of
    the ``(n, fn)`` pairs whose ``n`` divides the step, in the order given (``n`` = 0: never)."""

    def __init__(self, *schedule: Tuple[int, Callable[[int], None]]):
        self.schedule = schedule

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step < state.max_steps:
            for n, fn in self.schedule:
                if n and state.global_step % n == 0:
                    fn(state.global_step)
        return control


class ProgressLines(transformers.TrainerCallback):
    """A line per logged loss: step, mean loss since the last line, learning rate, speed."""

    def __init__(self, stream: Optional[TextIO] = None):
        self.stream = stream  # None: the standard output of the moment

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.time()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs and state.global_step:
            elapsed = time.time() - self.start
            print(f"step {state.global_step}/{state.max_steps} loss {logs['loss']:.4f} lr {logs.get('learning_rate', 0.0):.2e} "
                  f"{elapsed / state.global_step:.2f}s/step elapsed {elapsed / 60:.1f} min", file=self.stream, flush=True)
        return control
