"""Training progress as a line every few seconds (step, epoch, loss), so a person reading a run's log
tells a policy that trains from one that hangs. Plain Python: the caller passes where lines go
(the dpo_policy asset passes `context.log.info`, which puts them in Dagster's event log)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pipeline.progress import PROGRESS_EVERY_SECONDS, Heartbeat, Progress


class TrainingProgress:
    """What a trainer's events say, as lines: `begin`, `logged` (the metrics the trainer logs after
    a step: its loss), `step` (after each step's log; a line when `every` seconds passed since the
    last) and `end`. `clock` is the time source (seconds)."""

    def __init__(
        self,
        report: Progress,
        label: str,
        every: float = PROGRESS_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.report, self.label = report, label
        self.beat = Heartbeat(every, clock)
        self.loss: float | None = None

    def begin(self, max_steps: int, epochs: float, examples: int) -> None:
        self.beat.restart()
        self.report(f"{self.label}: {examples} examples, {max_steps} steps over {epochs:g} epochs")

    def logged(self, metrics: dict[str, Any] | None) -> None:
        if metrics and isinstance(metrics.get("loss"), int | float):
            self.loss = float(metrics["loss"])

    def step(self, step: int, max_steps: int, epoch: float | None) -> None:
        if self.beat.due():
            self.report(self._line(step, max_steps, epoch))

    def end(self, step: int, max_steps: int, epoch: float | None) -> None:
        self.report(self._line(step, max_steps, epoch, "done: "))

    def _line(self, step: int, max_steps: int, epoch: float | None, prefix: str = "") -> str:
        parts = [f"step {step}/{max_steps}"]
        if epoch is not None:
            parts.append(f"epoch {epoch:.2f}")
        if self.loss is not None:
            parts.append(f"loss {self.loss:.4f}")
        parts.append(f"{self.beat.elapsed():.0f} s")
        return f"{self.label}: {prefix}{', '.join(parts)}"


def trainer_callback(progress: TrainingProgress) -> Any:
    """A transformers `TrainerCallback` feeding `progress` (TRL's trainers are transformers')."""
    from transformers import TrainerCallback

    class _Callback(TrainerCallback):  # type: ignore[misc]
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            dataset = kwargs.get("train_dataloader")
            examples = len(dataset.dataset) if dataset is not None else 0
            # The epochs it will run (max_steps may end it before num_train_epochs).
            epochs = getattr(state, "num_train_epochs", None) or args.num_train_epochs
            progress.begin(state.max_steps, float(epochs), examples)

        def on_log(
            self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any
        ) -> None:
            # After a step's loss is logged (logging_steps 1), so a line pairs a step with its loss.
            progress.logged(logs)
            progress.step(state.global_step, state.max_steps, state.epoch)

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            progress.end(state.global_step, state.max_steps, state.epoch)

    return _Callback()
