"""Summary protos from tensors: scalars, histograms, images (PNG), text and hparams.

Each builder takes host values (a Tensor, an array or a number) and returns a ``Summary``
protobuf; ``writer.py`` wraps it in an ``Event`` with a step and a wall time.
"""
from __future__ import annotations

import io
import json
import math
import struct
import wave
import zlib

import numpy as np
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.plugins.custom_scalar import layout_pb2
from tensorboard.plugins.pr_curve.plugin_data_pb2 import PrCurvePluginData
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto

__all__ = ["to_numpy", "scalar", "histogram", "histogram_raw", "image", "images", "text", "tensor", "audio",
           "pr_curve", "pr_curve_raw", "custom_scalars", "image_with_boxes", "video", "mesh", "hparams"]


def to_numpy(x) -> np.ndarray:
    """Host values of a Tensor (detached, moved to the cpu, sparse made dense), array or number."""
    if hasattr(x, "detach") and hasattr(x, "layout"):
        x = x.detach()
        if x.is_sparse:
            x = x.to_dense()
        return x.cpu().numpy()
    return np.asarray(x)


def scalar(tag: str, value, new_style: bool = False, double_precision: bool = False) -> Summary:
    """A ``simple_value``; ``new_style`` (PyTorch's option) a one-element tensor for the scalars
    plugin instead, float32 or (``double_precision``) float64."""
    v = to_numpy(value)
    if v.size != 1:
        raise ValueError(f"add_scalar({tag!r}): expected a scalar value, got shape {list(v.shape)}")
    x = float(v.reshape(()))
    if not new_style:
        return Summary(value=[Summary.Value(tag=tag, simple_value=x)])
    proto = TensorProto(double_val=[x], dtype="DT_DOUBLE") if double_precision else \
        TensorProto(float_val=[x], dtype="DT_FLOAT")
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
    return Summary(value=[Summary.Value(tag=tag, tensor=proto, metadata=meta)])


def _tensorflow_edges() -> np.ndarray:
    """TensorFlow's default histogram buckets (PyTorch's ``bins='tensorflow'``): geometric
    steps of 1.1 from 1e-12 to 1e20 on both sides of zero."""
    pos, v = [], 1e-12
    while v < 1e20:            # repeated products, so the edges equal TensorFlow's to the last bit
        pos.append(v)
        v *= 1.1
    pos = np.array(pos)
    return np.concatenate((-pos[::-1], [0.0], pos))


_TF_EDGES = None


def histogram(tag: str, values, bins="tensorflow", max_bins: int | None = None) -> Summary:
    """Counts over ``bins`` (``'tensorflow'``, a numpy bins spec or edges), trimmed to the
    buckets from the first to the last non-empty one, after one empty bucket whose limit is the
    lower edge of the first (TensorBoard reads each bucket as ending at its limit)."""
    global _TF_EDGES
    v = to_numpy(values).astype(np.float64).reshape(-1)
    if v.size == 0:
        raise ValueError(f"add_histogram({tag!r}): the input has no elements")
    if isinstance(bins, str) and bins == "tensorflow":
        if _TF_EDGES is None:
            _TF_EDGES = _tensorflow_edges()
        bins = _TF_EDGES
    counts, edges = np.histogram(v, bins=bins)
    if max_bins is not None and len(counts) > max_bins:
        step = len(counts) // max_bins     # as PyTorch: groups of this many buckets
        pad = (-len(counts)) % step
        counts = np.pad(counts, (0, pad)).reshape(-1, step).sum(1)
        edges = np.concatenate((edges[:-1:step], edges[-1:]))
    nonzero = np.flatnonzero(counts)
    lo, hi = (nonzero[0], nonzero[-1] + 1) if nonzero.size else (0, len(counts))
    counts = np.concatenate(([0], counts[lo:hi]))
    hist = HistogramProto(min=float(v.min()), max=float(v.max()), num=int(v.size), sum=float(v.sum()),
                          sum_squares=float(np.dot(v, v)), bucket_limit=edges[lo:hi + 1].tolist(),
                          bucket=counts.astype(np.float64).tolist())
    return Summary(value=[Summary.Value(tag=tag, histo=hist)])


def histogram_raw(tag: str, min, max, num, sum, sum_squares, bucket_limits, bucket_counts) -> Summary:
    """A histogram from its statistics and buckets (each bucket ends at its limit)."""
    limits, counts = to_numpy(bucket_limits).reshape(-1), to_numpy(bucket_counts).reshape(-1)
    if len(limits) != len(counts):
        raise ValueError(f"len(bucket_limits) != len(bucket_counts): {len(limits)} limits, {len(counts)} counts "
                         f"in add_histogram_raw({tag!r})")
    hist = HistogramProto(min=float(min), max=float(max), num=float(num), sum=float(sum),
                          sum_squares=float(sum_squares), bucket_limit=limits.tolist(), bucket=counts.tolist())
    return Summary(value=[Summary.Value(tag=tag, histo=hist)])


# a tensor's values go in the TensorProto field of its dtype (half as its bit patterns, complex as pairs)
_TENSOR_FIELDS = {"float16": ("DT_HALF", "half_val"), "float32": ("DT_FLOAT", "float_val"),
                  "float64": ("DT_DOUBLE", "double_val"), "int8": ("DT_INT8", "int_val"),
                  "uint8": ("DT_UINT8", "int_val"), "int16": ("DT_INT16", "int_val"), "int32": ("DT_INT32", "int_val"),
                  "int64": ("DT_INT64", "int64_val"), "bool": ("DT_BOOL", "bool_val"),
                  "complex64": ("DT_COMPLEX64", "scomplex_val"), "complex128": ("DT_COMPLEX128", "dcomplex_val")}


def _shape(shape) -> TensorShapeProto:
    return TensorShapeProto(dim=[TensorShapeProto.Dim(size=int(n)) for n in shape])


def tensor(tag: str, values) -> Summary:
    """The whole tensor, for TensorBoard's tensor plugin."""
    arr = to_numpy(values)
    if arr.nbytes >= 1 << 31:
        raise ValueError("tensor is bigger than protocol buffer's hard limit of 2GB in size")
    if arr.dtype.name not in _TENSOR_FIELDS:
        raise ValueError(f"{tag} has unsupported tensor dtype {arr.dtype.name}")
    dtype, field = _TENSOR_FIELDS[arr.dtype.name]
    flat = arr.reshape(-1)
    vals = flat.view(np.uint16).tolist() if field == "half_val" else \
        np.stack([flat.real, flat.imag], -1).reshape(-1).tolist() if arr.dtype.kind == "c" else flat.tolist()
    proto = TensorProto(dtype=dtype, tensor_shape=_shape(arr.shape), **{field: vals})
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="tensor"))
    return Summary(value=[Summary.Value(tag=tag, metadata=meta, tensor=proto)])


def audio(tag: str, sound, sample_rate: int = 44100) -> Summary:
    """Mono samples in [-1, 1] (louder ones clipped, with a warning) as a 16-bit WAV file."""
    arr = to_numpy(sound).squeeze()
    if np.abs(arr).max() > 1:
        print("warning: audio amplitude out of range, auto clipped.")
        arr = arr.clip(-1, 1)
    if arr.ndim != 1:
        raise AssertionError("input tensor should be 1 dimensional.")
    pcm = (arr * np.iinfo(np.int16).max).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(sample_rate)
        f.writeframes(pcm.tobytes())
    clip = Summary.Audio(sample_rate=sample_rate, num_channels=1, length_frames=pcm.shape[-1],
                         encoded_audio_string=buf.getvalue(), content_type="audio/wav")
    return Summary(value=[Summary.Value(tag=tag, audio=clip)])


def pr_curve_raw(tag: str, tp, fp, tn, fn, precision, recall, num_thresholds: int = 127) -> Summary:
    """A precision-recall curve from its six rows of counts and rates, one column per threshold."""
    data = np.stack([to_numpy(v) for v in (tp, fp, tn, fn, precision, recall)])
    content = PrCurvePluginData(version=0, num_thresholds=min(num_thresholds, 127)).SerializeToString()
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="pr_curves", content=content))
    proto = TensorProto(dtype="DT_FLOAT", float_val=data.reshape(-1).tolist(), tensor_shape=_shape(data.shape[:2]))
    return Summary(value=[Summary.Value(tag=tag, metadata=meta, tensor=proto)])


def pr_curve(tag: str, labels, predictions, num_thresholds: int = 127, weights=None) -> Summary:
    """The curve of binary ``labels`` against ``predictions`` in [0, 1] at ``num_thresholds``
    (at most 127) evenly spaced thresholds: each prediction counts at and below its bucket."""
    n = min(num_thresholds, 127)
    labels = to_numpy(labels).astype(np.float64)
    w = 1.0 if weights is None else to_numpy(weights)
    bucket = np.floor(to_numpy(predictions) * (n - 1)).astype(np.int32)
    pos, _ = np.histogram(bucket, bins=n, range=(0, n - 1), weights=labels * w)
    neg, _ = np.histogram(bucket, bins=n, range=(0, n - 1), weights=(1.0 - labels) * w)
    tp, fp = np.cumsum(pos[::-1])[::-1], np.cumsum(neg[::-1])[::-1]
    tn, fn = fp[0] - fp, tp[0] - tp
    precision = tp / np.maximum(1e-7, tp + fp)
    recall = tp / np.maximum(1e-7, tp + fn)
    return pr_curve_raw(tag, tp, fp, tn, fn, precision, recall, n)


def custom_scalars(layout: dict) -> Summary:
    """The Custom Scalars dashboard's layout: ``{category: {title: ["Multiline", tags] or
    ["Margin", [value, lower, upper]]}}``."""
    categories = []
    for category, charts in layout.items():
        made = []
        for title, (kind, tags) in charts.items():
            if kind == "Margin":
                if len(tags) != 3:
                    raise AssertionError("len(tags) != 3")
                series = layout_pb2.MarginChartContent.Series(value=tags[0], lower=tags[1], upper=tags[2])
                made.append(layout_pb2.Chart(title=title, margin=layout_pb2.MarginChartContent(series=[series])))
            else:
                made.append(layout_pb2.Chart(title=title, multiline=layout_pb2.MultilineChartContent(tag=tags)))
        categories.append(layout_pb2.Category(title=category, chart=made))
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="custom_scalars"))
    proto = TensorProto(dtype="DT_STRING", string_val=[layout_pb2.Layout(category=categories).SerializeToString()],
                        tensor_shape=TensorShapeProto())
    return Summary(value=[Summary.Value(tag="custom_scalars__config__", tensor=proto, metadata=meta)])


def _hwc(arr: np.ndarray, dataformats: str) -> np.ndarray:
    """An image as (H, W, C) with C in 1, 3 or 4."""
    fmt = dataformats.upper()
    if arr.ndim != len(fmt) or sorted(fmt) != sorted(set(fmt)):
        raise ValueError(f"image of shape {list(arr.shape)} does not match dataformats {dataformats!r}")
    if "C" not in fmt:
        arr, fmt = arr[..., None], fmt + "C"
    arr = arr.transpose([fmt.index(c) for c in "HWC"])
    if arr.shape[2] not in (1, 3, 4):
        raise ValueError(f"an image needs 1, 3 or 4 channels, got {arr.shape[2]}")
    return arr


def _grid(arr: np.ndarray, dataformats: str, ncols: int = 8) -> np.ndarray:
    """A batch of images (N first) tiled into one (H, W, C) picture, ``ncols`` per row."""
    fmt = dataformats.upper()
    if not fmt.startswith("N"):
        raise ValueError(f"add_images expects dataformats starting with 'N', got {dataformats!r}")
    pics = [_hwc(a, fmt[1:]) for a in arr]
    if not pics:
        raise ValueError("add_images: the batch is empty")
    h, w, c = pics[0].shape
    ncols = min(len(pics), ncols)
    nrows = math.ceil(len(pics) / ncols)
    canvas = np.zeros((h * nrows, w * ncols, c), pics[0].dtype)
    for k, p in enumerate(pics):
        r, q = divmod(k, ncols)
        canvas[r * h:(r + 1) * h, q * w:(q + 1) * w] = p
    return canvas


def _uint8(arr: np.ndarray) -> np.ndarray:
    """uint8 pixels: other dtypes are read as [0, 1], scaled by 255 and truncated, as PyTorch's writer does."""
    if arr.dtype == np.uint8:
        return arr
    return np.clip(arr * 255, 0, 255).astype(np.uint8)


def png(pixels: np.ndarray) -> bytes:
    """A PNG file of (H, W, C) uint8 pixels (C: 3 RGB, 4 RGBA), filter 0 rows, zlib."""
    h, w, c = pixels.shape
    color = {3: 2, 4: 6}[c]
    raw = np.concatenate((np.zeros((h, 1), np.uint8), pixels.reshape(h, w * c)), axis=1).tobytes()

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def _image_summary(tag: str, hwc: np.ndarray) -> Summary:
    if hwc.shape[2] == 1:         # grayscale is stored as RGB, as PyTorch's writer does
        hwc = np.repeat(hwc, 3, axis=2)
    pixels = _uint8(hwc)
    img = Summary.Image(height=pixels.shape[0], width=pixels.shape[1], colorspace=pixels.shape[2],
                        encoded_image_string=png(pixels))
    return Summary(value=[Summary.Value(tag=tag, image=img)])


def image(tag: str, img, dataformats: str = "CHW") -> Summary:
    return _image_summary(tag, _hwc(to_numpy(img), dataformats))


def images(tag: str, imgs, dataformats: str = "NCHW") -> Summary:
    return _image_summary(tag, _grid(to_numpy(imgs), dataformats))


def image_with_boxes(tag: str, img, boxes, rescale: float = 1, dataformats: str = "CHW", labels=None) -> Summary:
    """An image with boxes (rows ``x1, y1, x2, y2`` in pixels) outlined in red, each with its label
    on a red band above its bottom edge; drawn with Pillow, optionally resized by ``rescale``."""
    from PIL import Image, ImageDraw, ImageFont
    arr = _hwc(to_numpy(img), dataformats)
    if arr.shape[2] == 1:   # grayscale is drawn and stored as RGB, as PyTorch's writer does
        arr = np.repeat(arr, 3, axis=2)
    pixels = (arr.astype(np.float32) * (1 if arr.dtype == np.uint8 else 255)).clip(0, 255).astype(np.uint8)
    h, w, c = pixels.shape
    picture = Image.fromarray(pixels)
    draw, font = ImageDraw.Draw(picture), ImageFont.load_default()
    for k, (x1, y1, x2, y2) in enumerate(to_numpy(boxes)):
        draw.line([(x1, y1), (x1, y2), (x2, y2), (x2, y1), (x1, y1)], width=2, fill="Red")
        label = None if labels is None else labels[k]
        if label:
            left, top, right, bottom = font.getbbox(label)
            margin = np.ceil(0.05 * (bottom - top))
            draw.rectangle([(x1, y2 - (bottom - top) - 2 * margin), (x1 + right - left, y2)], fill="Red")
            draw.text((x1 + margin, y2 - (bottom - top) - margin), label, fill="black", font=font)
    picture = picture.resize((int(w * rescale), int(h * rescale)), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    picture.save(buf, format="PNG")
    encoded = Summary.Image(height=h, width=w, colorspace=c, encoded_image_string=buf.getvalue())
    return Summary(value=[Summary.Value(tag=tag, image=encoded)])


def _video_frames(v: np.ndarray) -> np.ndarray:
    """(B, T, C, H, W) clips as (T, H', W', C) frames: the batch, padded with black clips to a power
    of two, tiled into a grid of 2**(floor(log2 B) // 2) rows, as PyTorch's writer lays it out."""
    b, t, c, h, w = v.shape
    v = v.astype(np.float32) / 255.0 if v.dtype == np.uint8 else v
    padded = 1 << (b - 1).bit_length()
    if padded != b:
        v = np.concatenate((v, np.zeros((padded - b, t, c, h, w), v.dtype)))
    rows = 2 ** ((b.bit_length() - 1) // 2)
    cols = padded // rows
    return v.reshape(rows, cols, t, c, h, w).transpose(2, 0, 4, 1, 5, 3).reshape(t, rows * h, cols * w, c)


def video(tag: str, clips, fps: float = 4) -> Summary:
    """Clips (B, T, C, H, W), floats in [0, 1] or uint8, as one animated GIF (a grid of the batch);
    Pillow encodes it (PyTorch's writer needs moviepy for this)."""
    from PIL import Image
    frames = (_video_frames(to_numpy(clips)) * 255).clip(0, 255).astype(np.uint8)
    t, h, w, c = frames.shape
    pictures = [Image.fromarray(f[:, :, 0] if c == 1 else f[:, :, :3]) for f in frames]
    buf = io.BytesIO()
    pictures[0].save(buf, format="GIF", save_all=True, append_images=pictures[1:], duration=1000 / fps, loop=0)
    gif = Summary.Image(height=h, width=w, colorspace=c, encoded_image_string=buf.getvalue())
    return Summary(value=[Summary.Value(tag=tag, image=gif)])


def mesh(tag: str, vertices, colors, faces, config_dict=None) -> Summary:
    """A 3-D mesh for TensorBoard's mesh plugin: one (B, N, 3) float tensor each for the vertices,
    faces and colors given, their metadata naming the parts present and the three.js config."""
    from tensorboard.plugins.mesh import metadata
    from tensorboard.plugins.mesh.plugin_data_pb2 import MeshPluginData
    parts = [(t, kind) for t, kind in ((vertices, MeshPluginData.VERTEX), (faces, MeshPluginData.FACE),
                                      (colors, MeshPluginData.COLOR)) if t is not None]
    components = metadata.get_components_bitmask([kind for _, kind in parts])
    config = "{}" if config_dict is None else json.dumps(config_dict, sort_keys=True)
    values = []
    for t, kind in parts:
        arr = to_numpy(t)
        meta = metadata.create_summary_metadata(tag, None, kind, components, arr.shape, None, json_config=config)
        proto = TensorProto(dtype="DT_FLOAT", float_val=arr.reshape(-1).tolist(), tensor_shape=_shape(arr.shape[:3]))
        values.append(Summary.Value(tag=metadata.get_instance_name(tag, kind), tensor=proto, metadata=meta))
    return Summary(value=values)


def text(tag: str, text_string: str) -> Summary:
    """A string for TensorBoard's text plugin (the tag gets ``/text_summary``, as PyTorch's)."""
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))
    proto = TensorProto(dtype="DT_STRING", string_val=[text_string.encode("utf-8")],
                        tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
    return Summary(value=[Summary.Value(tag=tag + "/text_summary", metadata=meta, tensor=proto)])


def _hparams_summary(tag: str, **data) -> Summary:
    from tensorboard.plugins.hparams.metadata import PLUGIN_DATA_VERSION, PLUGIN_NAME
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
    content = HParamsPluginData(version=PLUGIN_DATA_VERSION, **data).SerializeToString()
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=PLUGIN_NAME, content=content))
    return Summary(value=[Summary.Value(tag=tag, metadata=meta)])


def hparams(hparam_dict: dict, metric_dict: dict, hparam_domain_discrete: dict | None = None):
    """The HParams plugin's three summaries of one trial, as PyTorch's ``summary.hparams`` makes
    them: the experiment (each hyperparameter's name and type, the metrics' tags), the session's
    start (the values) and its end (success). A number (a bool included, as ``isinstance(v, int)``
    says) is a float64 hyperparameter, a string a string one, a Tensor its first element; ``None``
    is left out; anything else raises PyTorch's ValueError."""
    from google.protobuf import struct_pb2
    from tensorboard.plugins.hparams.api_pb2 import DataType, Experiment, HParamInfo, MetricInfo, MetricName, Status
    from tensorboard.plugins.hparams.metadata import EXPERIMENT_TAG, SESSION_END_INFO_TAG, SESSION_START_INFO_TAG
    from tensorboard.plugins.hparams.plugin_data_pb2 import SessionEndInfo, SessionStartInfo
    for name, d in (("hparam_dict", hparam_dict), ("metric_dict", metric_dict)):
        if not isinstance(d, dict):
            raise TypeError(f"parameter: {name} should be a dictionary, nothing logged.")
    discrete = hparam_domain_discrete or {}
    if not isinstance(discrete, dict):
        raise TypeError("parameter: hparam_domain_discrete should be a dictionary, nothing logged.")
    for k, v in discrete.items():
        if k not in hparam_dict or not isinstance(v, list) or not all(isinstance(d, type(hparam_dict[k])) for d in v):
            raise TypeError(f"parameter: hparam_domain_discrete[{k}] should be a list of same type as "
                            f"hparam_dict[{k}].")
    start, infos = SessionStartInfo(), []
    for k, v in hparam_dict.items():
        if v is None:
            continue
        if isinstance(v, (int, float, str)):
            field, kind = ("string_value", "DATA_TYPE_STRING") if isinstance(v, str) else \
                ("number_value", "DATA_TYPE_FLOAT64")
            setattr(start.hparams[k], field, v)
            domain = struct_pb2.ListValue(values=[struct_pb2.Value(**{field: d}) for d in discrete[k]]) \
                if k in discrete else None
            infos.append(HParamInfo(name=k, type=DataType.Value(kind), domain_discrete=domain))
        elif hasattr(v, "detach") and hasattr(v, "layout"):
            start.hparams[k].number_value = to_numpy(v)[0]   # a 0-d tensor raises numpy's IndexError, as PyTorch's
            infos.append(HParamInfo(name=k, type=DataType.Value("DATA_TYPE_FLOAT64")))
        else:
            raise ValueError("value should be one of int, float, str, bool, or torch.Tensor")
    experiment = Experiment(hparam_infos=infos, metric_infos=[MetricInfo(name=MetricName(tag=k)) for k in metric_dict])
    return (_hparams_summary(EXPERIMENT_TAG, experiment=experiment),
            _hparams_summary(SESSION_START_INFO_TAG, session_start_info=start),
            _hparams_summary(SESSION_END_INFO_TAG,
                             session_end_info=SessionEndInfo(status=Status.Value("STATUS_SUCCESS"))))
