"""A recording tape that streams view-model deltas while it records.

Used by the ``%%tape`` magic (to feed a TapeView) and by the kernel's comm bridge (to feed
the JupyterLab side panel): one recorder, several sinks.
"""
from __future__ import annotations

import threading
import time
from collections import deque

from tapelab import events
from tapelab.autograd.engine import running_node
from tapelab.tape import SAMPLE, TapeNode, sample, summarize_samples, tape

from .viewmodel import GraphBuilder

OVERHEAD = 0.1   # the share of a steady loop's time that recording its steps may take

__all__ = ["LiveTape"]


class LiveTape(tape):
    """A ``tapelab.tape`` that turns each record into view-model nodes as it arrives and calls
    every sink with a delta at most ``rate`` times a second (and once more on ``flush()``).

    Args:
        sinks: callables taking a delta dict (see ``GraphBuilder.take``). A sink that raises
            is dropped: a broken view must never break the cell being recorded.
        rate: most deltas per second.
        max_nodes: nodes sent at most; past it only counts go on (``meta.truncated``), and
            recorded records are no longer kept, so a long training loop stays small.
        summaries: add value and gradient summaries to each record (``tapelab.tape.summarize``
            over a strided sample of ``SAMPLE`` values, so cheap; no tensor is kept alive,
            unlike ``tapelab.tape(keep_values=True)``).
        window: training steps whose records are kept (``nodes``), the latest ones; records of
            earlier steps are dropped once the view model has them (``dropped`` counts them).

    Memory is bounded whatever the loop's length: the view model holds at most ``max_nodes``
    nodes (a repeated step folds into the first one shown: its counts go up and its summaries
    become the latest step's), and the records of at most ``window`` recorded steps, or of
    ``2 * max_nodes`` records when no step ends, are kept.

    A steady training loop (its steps folding, ``GraphBuilder``) is recorded one step per delta,
    and no more often than keeps recording under ``OVERHEAD`` of the loop's time (a recorded
    step's extra time over a counted one, spread over the steps between): the steps between
    are counted (ops, backward nodes, one folded step each) and make no record, so streaming a
    long loop costs little; a step that differs between two recorded ones is counted, not drawn.
    Counted steps are not even heard op by op (``listen_ops(False)``: the dispatcher's fast
    path) nor node by node (``listen_steps(False)``: the backward walk's unwatched paths): only the
    ``backward_pass`` event of each backward pass arrives, with its node count; a step ends once it
    has run as many nodes as a heard step had, and counts as many ops as the last heard step;
    listening resumes when a step is to be recorded.
    """

    def __init__(self, sinks=(), rate: float = 30.0, max_nodes: int = 5000, summaries: bool = True,
                 title: str = "", window: int = 4):
        if type(window) is not int or window < 1:
            raise ValueError(f"LiveTape: window must be a positive int, got {window!r}")
        self._pending: list = []      # (sample or None, ((record, attr), ...)), in order
        self._unbuilt: list = []      # records not given to the builder yet, in order
        self._bound = 0               # most nodes they can make
        super().__init__(keep_values=False)
        self.summaries = summaries
        self.sinks = list(sinks)
        self.interval = 1.0 / rate
        self.builder = GraphBuilder(title=title, max_nodes=max_nodes)
        self.max_nodes = max_nodes
        self.window = window
        self._marks: deque = deque()  # index of the first record of each recorded step in the window
        self._last = 0.0
        self._counting = False        # past the cap: events are counted, no record is made
        self._skip = False            # this step is counted, not recorded (a steady loop between deltas)
        self._after_backward = False
        self._skipped = [0, 0]        # forward ops, backward nodes of the step being counted
        self._recorded_at = self._recorded_cpu = 0.0   # when the last recorded step started (wall, CPU)
        self._step_at = None          # CPU time when the step in progress started
        self._took = [None, None]     # CPU seconds the last recorded step took, and the last counted one
        self._pass_ops = self._post_ops = self._b_ops = 0   # the step in progress: forward ops before
        # and after its backward pass, backward nodes; the same of the last step heard op by op:
        self._pass = self._post = self._nb = 0
        self._deaf = False            # op events paused: counted steps, told apart by backward nodes
        self._heard_trigger = 0       # the deaf step's first op was heard (and counted)
        self._due = False             # a deaf step decided that the next one is recorded
        self.sent = 0                 # deltas sent, all sinks counted once
        self._pass_sub = None         # the backward_pass subscription, while recording

    # Summaries are taken in two halves: per op only a small copy of a strided sample is kept
    # (``_pending``); the statistics of all pending samples are computed together, in a few
    # array calls, before the next delta is taken (``flush``) or the records are read.
    def _settle(self) -> None:
        if self._pending:
            self._resolve()

    def _queue(self, t, targets: tuple) -> None:
        self._pending.append((sample(t, SAMPLE), targets))

    def _resolve(self) -> None:
        pending, self._pending = self._pending, []
        stats = iter(summarize_samples([p[0] for p in pending if p[0] is not None]))
        for smp, targets in pending:
            value = next(stats) if smp is not None else None
            for rec, attr in targets:
                setattr(rec, attr, value)
                self.builder.summary_arrived(rec, attr, value)

    # The tape's sink API: each event is recorded (the base method), or only counted. Past the
    # cap (``builder.truncated``) a record would only be counted and dropped, so none is made:
    # each event is one count (ops a vjp runs are no nodes, so not counted).
    def record_op(self, ev) -> TapeNode | None:
        forward = running_node() is None
        if self._counting:
            if forward:
                self.builder.count("forward")
            self._tick()
            return
        if forward and self._after_backward and ev.requires_grad:
            self._step_starts()
        elif forward:
            if self._after_backward:
                self._post_ops += 1
            else:
                self._pass_ops += 1
        if self._skip:
            self._skipped[0] += forward
            self._tick()
            return
        rec = super().record_op(ev)
        if self.summaries and ev.tensors and rec.phase == "forward" and self._room():
            self._queue(ev.tensors[1], ((rec, "value"),))   # (ops a vjp runs are no nodes: no summary)
        self._added(rec)
        return rec

    def record_step(self, step) -> TapeNode | None:
        if not self._after_backward:   # a heard step's forward pass is over (deaf steps hear no step)
            self._pass = self._pass_ops
        self._after_backward = True
        self._b_ops += 1
        if self._counting:
            self.builder.count("backward")
            self._tick()
            return
        if self._skip:
            self._skipped[1] += 1
            self._tick()
            return
        rec = super().record_step(step)
        if self.summaries and self._room():
            gouts = step.grad_outputs
            g = None
            for x in gouts:
                if x is not None:
                    g = x
                    break
            fwd = self.forward_record(step.node.tape_seq)
            if fwd is not None and gouts:
                if gouts[0] is g:
                    self._queue(g, ((rec, "grad"), (fwd, "grad")))
                else:
                    self._queue(g, ((rec, "grad"),))
                    self._queue(gouts[0], ((fwd, "grad"),))
            else:
                self._queue(g, ((rec, "grad"),))
        self._added(rec)
        return rec

    def _passed(self, steps: int) -> None:
        """A backward pass of a deaf step ended, having run ``steps`` nodes: they are counted, and the
        step ends once it has run as many as a heard step had (nothing reaches the builder until
        then: a delta only at its end)."""
        self._after_backward = True
        self._b_ops += steps
        self._skipped[1] += steps
        if self._b_ops >= self._nb:
            self._deaf_step_done()
            self._tick()

    def _deaf_step_done(self) -> None:
        """A counted step's backward pass is over (as many nodes as a heard step's): it ran as
        many forward ops as the last heard one. If the next step is to be recorded, listen again
        (this step's remaining ops are heard and the next step starts as usual); else count the
        whole step now and stay deaf."""
        self._skipped[0] += self._pass - self._heard_trigger
        self._heard_trigger = 0
        cpu = time.thread_time()
        self._took[1] = cpu - self._step_at
        self._step_at = cpu
        if self._record_next(time.perf_counter(), cpu):
            self._deaf, self._due = False, True    # decided here: the next step is recorded
            self.listen_ops(True)
            self.listen_steps(True)
            return
        self._skipped[0] += self._post
        self.builder.count_step(*self._skipped)
        self._skipped = [0, 0]
        self._b_ops = 0

    def _record_next(self, now: float, cpu: float) -> bool:
        """Whether the step starting now is recorded: a delta interval and the ``OVERHEAD``
        budget since the last recorded one (and one counted step measured first)."""
        if self._took[1] is None:         # no step counted yet: in a longer loop count one, to know
            return self.builder.streak < 4 and now - self._recorded_at >= self.interval   # what recording adds
        wait = (self._took[0] - self._took[1]) / OVERHEAD if self._took[0] is not None else 0.0
        return now - self._recorded_at >= self.interval and cpu - self._recorded_cpu >= wait

    def _step_starts(self) -> None:
        """A step starts (the builder's rule): record it, or count it if the loop is steady and
        a step was recorded less than a delta interval or its recording budget ago."""
        self._after_backward = False
        self._pass_ops = 1                # this op starts the step's forward pass
        self._post, self._post_ops = self._post_ops, 0
        self._nb, self._b_ops = self._b_ops, 0
        if self._skip:
            self.builder.count_step(*self._skipped)
            self._skipped = [0, 0]
        if self._unbuilt:                    # the builder's fold state, up to the step that ended
            self._build()
        now, cpu = time.perf_counter(), time.thread_time()   # (CPU time: a loaded machine does not count)
        if self._step_at is not None and not self._due:   # (a deaf step was timed when its backward ended)
            self._took[self._skip] = cpu - self._step_at
        self._step_at = cpu
        self._skip = self.builder.streak >= 2 and not (self._due or self._record_next(now, cpu))
        self._due = False
        if self._skip and self._pass and self._nb:   # counted steps need no op event: deaf until a
            self._deaf, self._heard_trigger = True, 1  # step is to be recorded again
            self.listen_ops(False)
            self.listen_steps(False)
        if not self._skip:
            self._recorded_at, self._recorded_cpu = now, cpu
            self._marks.append(self.dropped + len(self._nodes))
            if len(self._marks) > self.window:
                self._marks.popleft()
                self._forget(self._marks[0] - self.dropped)

    def _forget(self, k: int) -> None:
        """Drop the ``k`` oldest records: the builder has them (``_build`` ran) and their pending
        summaries are resolved first (a folded record reaches its node through ``aliases``)."""
        if self._pending:
            self._resolve()
        nodes, by_seq, aliases = self._nodes, self._by_seq, self.builder.aliases
        for rec in nodes[:k]:
            if rec.seq is not None and by_seq.get(rec.seq) is rec:
                del by_seq[rec.seq]
            aliases.pop(rec.index, None)
        del nodes[:k]
        self.dropped += k

    # Records reach the builder in batches too (``_build``: at each delta, or when the cap is
    # near), in order, so a delta holds exactly what adding them one by one would give.
    def _room(self) -> bool:
        """Whether the builder has fewer than ``max_nodes`` nodes counted, all records so far added."""
        total = self.builder.total
        if total >= self.max_nodes:
            return False
        if total + self._bound < self.max_nodes:   # at most 1 + (its inputs) nodes per record
            return True
        self._build()
        return self.builder.total < self.max_nodes

    def _build(self) -> None:
        recs, self._unbuilt, self._bound = self._unbuilt, [], 0
        add = self.builder.add
        for rec in recs:
            add(rec)

    def _added(self, rec) -> None:
        self._unbuilt.append(rec)
        self._bound += 1 + len(rec.inputs)
        if len(self._unbuilt) >= 2 * self.max_nodes or self.builder.truncated:
            self._build()
            if self.builder.truncated:
                self.clear()               # past the cap only counts matter
                self._counting = True
        self._tick()

    def _tick(self) -> None:
        """A delta at most every ``interval`` seconds."""
        now = time.perf_counter()
        if now - self._last >= self.interval:
            self._last = now
            self.flush()

    def flush(self) -> None:
        """Send what was recorded since the last delta (if anything)."""
        if self._unbuilt:
            self._build()
        if self._pending:
            self._resolve()
        delta = self.builder.take()
        if not (delta["nodes"] or delta["edges"] or delta["groups"] or delta["updates"]) and not self.builder.truncated:
            return
        self.sent += 1
        for sink in tuple(self.sinks):
            try:
                sink(delta)
            except Exception:
                self.sinks.remove(sink)

    def __enter__(self) -> "LiveTape":
        super().__enter__()
        tid = threading.get_ident()

        def on_pass(ev) -> None:
            if self._deaf and threading.get_ident() == tid:
                self._passed(ev.steps)
        self._pass_sub = events.subscribe("backward_pass", on_pass)
        return self

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        if self._pass_sub is not None:
            self._pass_sub.unsubscribe()
            self._pass_sub = None
        self._deaf = False
        if self._skip and any(self._skipped):   # the last step was being counted (an ended deaf one was)
            self.builder.count_step(*self._skipped)
            self._skip, self._skipped = False, [0, 0]
        if self._unbuilt:
            self._build()
        self.builder.close()
        self.flush()

    def graph(self) -> dict:
        if self._unbuilt:
            self._build()
        if self._pending:
            self._resolve()
        return self.builder.graph()
