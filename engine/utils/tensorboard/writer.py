"""``SummaryWriter``: PyTorch's event-file logger over the ``tensorboard`` package's writer."""
from __future__ import annotations

import io
import os
import socket
import sys
import time
from datetime import datetime

import numpy as np

from tensorboard.compat.proto.config_pb2 import RunMetadata
from tensorboard.compat.proto.event_pb2 import Event, SessionLog, TaggedRunMetadata
from tensorboard.compat.proto.step_stats_pb2 import DeviceStepStats, StepStats
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from . import summary as _summary
from .graph import graph_def
from .projector import Projector

__all__ = ["SummaryWriter", "FileWriter"]


class SummaryWriter:
    """Writes scalars, histograms, images, text, graphs and hparams to TensorBoard event files.

    Args:
        log_dir: the directory (default ``runs/<Mon>DD_HH-MM-SS_<host><comment>``, as PyTorch's).
        comment: a suffix for the default ``log_dir``.
        purge_step, max_queue, flush_secs, filename_suffix: as ``torch.utils.tensorboard``
            (``purge_step``: the first event file starts with a session restart at that step, so
            TensorBoard hides the earlier runs' events from it on).

    >>> with SummaryWriter("runs/exp1") as w:
    ...     for step in range(3):
    ...         w.add_scalar("loss", 1.0 / (step + 1), step)
    """

    def __init__(self, log_dir: str | None = None, comment: str = "", purge_step=None, max_queue: int = 10,
                 flush_secs: int = 120, filename_suffix: str = ""):
        if not log_dir:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = str(log_dir)
        self.purge_step, self.max_queue, self.flush_secs = purge_step, max_queue, flush_secs
        self.filename_suffix = filename_suffix
        self._writer = None
        self._file_writer()                 # the event file exists from the start, as PyTorch's
        self._scalar_writers: dict = {}     # add_scalars: one run directory per series
        self._projector = Projector(self.log_dir)

    def _file_writer(self) -> EventFileWriter:
        """The run's event file; a closed writer opens a new one, as PyTorch's ``_get_file_writer``."""
        if self._writer is None:
            self._writer = EventFileWriter(self.log_dir, self.max_queue, self.flush_secs, self.filename_suffix)
            if self.purge_step is not None:
                # a restarted session: TensorBoard hides the earlier runs' events at and after this step
                step, self.purge_step = int(self.purge_step), None
                self._writer.add_event(Event(wall_time=time.time(), step=step, file_version="brain.Event:2"))
                self._writer.add_event(Event(wall_time=time.time(), step=step,
                                             session_log=SessionLog(status=SessionLog.START)))
        return self._writer

    def _get_file_writer(self) -> "FileWriter":
        """The run's event file as PyTorch's ``FileWriter`` (Lightning's ``log_hyperparams`` writes its
        hparams summaries through it)."""
        return FileWriter(self)

    def get_logdir(self) -> str:
        return self.log_dir

    def _add(self, summary=None, global_step=None, walltime=None, writer=None, **fields) -> None:
        event = Event(wall_time=time.time() if walltime is None else float(walltime), summary=summary, **fields)
        if global_step is not None:
            event.step = int(global_step)
        (writer or self._file_writer()).add_event(event)

    def add_scalar(self, tag: str, scalar_value, global_step=None, walltime=None, new_style: bool = False,
                   double_precision: bool = False) -> None:
        self._add(_summary.scalar(tag, scalar_value, new_style, double_precision), global_step, walltime)

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict, global_step=None, walltime=None) -> None:
        """Each series in its own run ``<log_dir>/<main_tag>_<tag>``, all under the tag ``main_tag``."""
        walltime = time.time() if walltime is None else walltime
        for tag, value in tag_scalar_dict.items():
            run = os.path.join(self.log_dir, f"{main_tag}_{tag}".replace("/", "_"))
            w = self._scalar_writers.get(run)
            if w is None:
                w = self._scalar_writers[run] = EventFileWriter(run, self.max_queue, self.flush_secs,
                                                                self.filename_suffix)
            self._add(_summary.scalar(main_tag, value), global_step, walltime, writer=w)

    def add_histogram(self, tag: str, values, global_step=None, bins="tensorflow", walltime=None,
                      max_bins=None) -> None:
        self._add(_summary.histogram(tag, values, bins, max_bins), global_step, walltime)

    def add_histogram_raw(self, tag: str, min, max, num, sum, sum_squares, bucket_limits, bucket_counts,
                          global_step=None, walltime=None) -> None:
        """A histogram already counted: its statistics and the upper limit and count of each bucket."""
        self._add(_summary.histogram_raw(tag, min, max, num, sum, sum_squares, bucket_limits, bucket_counts),
                  global_step, walltime)

    def add_tensor(self, tag: str, tensor, global_step=None, walltime=None) -> None:
        self._add(_summary.tensor(tag, tensor), global_step, walltime)

    def add_audio(self, tag: str, snd_tensor, global_step=None, sample_rate: int = 44100, walltime=None) -> None:
        """Mono samples in [-1, 1], stored as a 16-bit WAV clip."""
        self._add(_summary.audio(tag, snd_tensor, sample_rate), global_step, walltime)

    def add_pr_curve(self, tag: str, labels, predictions, global_step=None, num_thresholds: int = 127,
                     weights=None, walltime=None) -> None:
        """The precision-recall curve of binary ``labels`` against ``predictions`` in [0, 1]."""
        self._add(_summary.pr_curve(tag, labels, predictions, num_thresholds, weights), global_step, walltime)

    def add_pr_curve_raw(self, tag: str, true_positive_counts, false_positive_counts, true_negative_counts,
                         false_negative_counts, precision, recall, global_step=None, num_thresholds: int = 127,
                         weights=None, walltime=None) -> None:
        self._add(_summary.pr_curve_raw(tag, true_positive_counts, false_positive_counts, true_negative_counts,
                                        false_negative_counts, precision, recall, num_thresholds),
                  global_step, walltime)

    def add_custom_scalars(self, layout: dict) -> None:
        """The Custom Scalars layout: ``{category: {title: ["Multiline", tags] / ["Margin", [v, lo, hi]]}}``."""
        self._add(_summary.custom_scalars(layout))

    def add_custom_scalars_multilinechart(self, tags, category: str = "default", title: str = "untitled") -> None:
        self.add_custom_scalars({category: {title: ["Multiline", tags]}})

    def add_custom_scalars_marginchart(self, tags, category: str = "default", title: str = "untitled") -> None:
        if len(tags) != 3:
            raise AssertionError(f"Expected 3 tags, got {len(tags)}.")
        self.add_custom_scalars({category: {title: ["Margin", tags]}})

    def add_embedding(self, mat, metadata=None, label_img=None, global_step=None, tag: str = "default",
                      metadata_header=None) -> None:
        """Points (N, D) for the projector, with optional labels and (N, C, H, W) thumbnails."""
        self._projector.add(mat, metadata, label_img, global_step, tag, metadata_header)

    def add_figure(self, tag: str, figure, global_step=None, close: bool = True, walltime=None) -> None:
        """A matplotlib figure (or a list of them, tiled) rendered to an image."""
        if isinstance(figure, list):
            self.add_images(tag, np.stack([_render(f, close) for f in figure]), global_step, walltime, "NCHW")
        else:
            self.add_image(tag, _render(figure, close), global_step, walltime, "CHW")

    def add_image(self, tag: str, img_tensor, global_step=None, walltime=None, dataformats: str = "CHW") -> None:
        """One image: floats in [0, 1] or uint8, laid out as ``dataformats`` (CHW, HWC, HW...)."""
        self._add(_summary.image(tag, img_tensor, dataformats), global_step, walltime)

    def add_images(self, tag: str, img_tensor, global_step=None, walltime=None, dataformats: str = "NCHW") -> None:
        """A batch of images tiled into one grid, eight per row."""
        self._add(_summary.images(tag, img_tensor, dataformats), global_step, walltime)

    def add_image_with_boxes(self, tag: str, img_tensor, box_tensor, global_step=None, walltime=None,
                             rescale: float = 1, dataformats: str = "CHW", labels=None) -> None:
        """An image with boxes ``(N, 4)`` as ``x1, y1, x2, y2`` pixels drawn on it (and ``labels``)."""
        if labels is not None:
            labels = [labels] if isinstance(labels, str) else labels
            if len(labels) != len(box_tensor):
                labels = None   # PyTorch draws the boxes without labels then
        self._add(_summary.image_with_boxes(tag, img_tensor, box_tensor, rescale, dataformats, labels),
                  global_step, walltime)

    def add_video(self, tag: str, vid_tensor, global_step=None, fps: float = 4, walltime=None) -> None:
        """Clips ``(N, T, C, H, W)`` (floats in [0, 1] or uint8) as an animated GIF, the batch in a grid."""
        self._add(_summary.video(tag, vid_tensor, fps), global_step, walltime)

    def add_mesh(self, tag: str, vertices, colors=None, faces=None, config_dict=None, global_step=None,
                 walltime=None) -> None:
        """A 3-D mesh or point cloud: vertices (B, N, 3), optional faces (B, F, 3) and colors (B, N, 3)."""
        self._add(_summary.mesh(tag, vertices, colors, faces, config_dict), global_step, walltime)

    def add_text(self, tag: str, text_string: str, global_step=None, walltime=None) -> None:
        self._add(_summary.text(tag, text_string), global_step, walltime)

    def add_graph(self, model, input_to_model=None, verbose: bool = False, use_strict_trace: bool = True) -> None:
        """The op graph of one forward pass ``model(input_to_model)``, scoped by module."""
        inputs = input_to_model if isinstance(input_to_model, (tuple, list)) else \
            (() if input_to_model is None else (input_to_model,))
        self._add(graph_def=graph_def(model, tuple(inputs)).SerializeToString())
        # PyTorch's writer follows the graph with its (empty) step statistics, tagged "step1"
        stats = RunMetadata(step_stats=StepStats(dev_stats=[DeviceStepStats(device="/device:CPU:0")]))
        self._add(tagged_run_metadata=TaggedRunMetadata(tag="step1", run_metadata=stats.SerializeToString()))

    def add_hparams(self, hparam_dict: dict, metric_dict: dict, hparam_domain_discrete=None, run_name=None,
                    global_step=None) -> None:
        """A trial for TensorBoard's HParams tab: the hyperparameters and their metrics, in the
        run ``<log_dir>/<run_name>`` (default: the current time), as PyTorch's."""
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        summaries = _summary.hparams(hparam_dict, metric_dict, hparam_domain_discrete)
        run = os.path.join(self.log_dir, run_name or str(time.time()))
        w = EventFileWriter(run, self.max_queue, self.flush_secs, self.filename_suffix)
        for s in summaries:
            self._add(s, global_step, writer=w)
        for k, v in metric_dict.items():
            self._add(_summary.scalar(k, v), global_step, writer=w)
        w.close()

    def flush(self) -> None:
        """Write pending events; after ``close()`` nothing is pending (PyTorch's ignores it too)."""
        if self._writer is not None:
            self._writer.flush()
        for w in self._scalar_writers.values():
            w.flush()

    def close(self) -> None:
        """Close the event files; closing twice, or flushing after, is harmless (Lightning does both)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        for w in self._scalar_writers.values():
            w.close()
        self._scalar_writers.clear()

    def __enter__(self) -> "SummaryWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _render(figure, close: bool) -> np.ndarray:
    """A matplotlib figure's RGB pixels (C, H, W), drawn by its own Agg ``savefig`` (the engine
    imports no plotting package); closing it tells pyplot, which made it if it is loaded."""
    buf = io.BytesIO()
    figure.savefig(buf, format="rgba", dpi=figure.dpi)
    w, h = int(figure.bbox.width), int(figure.bbox.height)
    rgb = np.frombuffer(buf.getvalue(), np.uint8).reshape(h, w, 4)[:, :, :3]
    pyplot = sys.modules.get("matplotlib.pyplot")
    if close and pyplot is not None:
        pyplot.close(figure)
    return np.moveaxis(rgb, 2, 0)


class FileWriter:
    """PyTorch's ``FileWriter`` over a ``SummaryWriter``'s run event file: summaries and events written
    as they are given."""

    def __init__(self, owner: SummaryWriter):
        self._owner = owner

    def get_logdir(self) -> str:
        return self._owner.log_dir

    def add_event(self, event, step=None, walltime=None) -> None:
        event.wall_time = time.time() if walltime is None else float(walltime)
        if step is not None:
            event.step = int(step)
        self._owner._file_writer().add_event(event)

    def add_summary(self, summary, global_step=None, walltime=None) -> None:
        self._owner._add(summary, global_step, walltime)

    def flush(self) -> None:
        self._owner.flush()

    def close(self) -> None:
        self._owner.close()
