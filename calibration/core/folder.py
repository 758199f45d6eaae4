"""``--model DIR``: a diffusers pipeline saved in a folder (``save_pretrained``), as a factory.

The folder is read by ``DiffusionPipeline.from_pretrained`` with ``local_files_only=True``: nothing
is downloaded, whatever the folder's ``model_index.json`` names. ``--dtype`` and ``--variant`` are
``from_pretrained``'s ``torch_dtype`` and ``variant``. The folder gives no demo shapes: the command
line's ``--target`` and ``--probe`` do.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from artifact.spelling import path_text
from calibration.core.factory import Factory, checked_build
from calibration.errors import CalibrationError

#: ``--dtype``: the torch dtypes a pipeline's weights load in, by name.
DTYPES = ("float32", "float16", "bfloat16")
#: The largest ``model_index.json`` read (a diffusers index is a few hundred bytes).
MAX_INDEX_BYTES = 1 << 20


def pipeline_class(folder: Path) -> str:
    """The pipeline class the folder's ``model_index.json`` names (``CalibrationError`` when the
    folder is not a saved diffusers pipeline)."""
    index = folder / "model_index.json"
    where = path_text(str(folder))
    if not folder.is_dir():
        raise CalibrationError(f"--model: no folder {where}")
    if not index.is_file():
        raise CalibrationError(
            f"--model: {where} has no model_index.json; give the folder a diffusers pipeline's "
            "save_pretrained wrote"
        )
    try:
        if index.stat().st_size > MAX_INDEX_BYTES:
            raise CalibrationError(f"--model: {where}/model_index.json is over 1 MiB")
        document = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CalibrationError(f"--model: cannot read {where}/model_index.json: {exc}") from None
    name = document.get("_class_name") if isinstance(document, dict) else None
    if not isinstance(name, str) or not name:
        raise CalibrationError(f"--model: {where}/model_index.json names no _class_name")
    return name


def folder_factory(folder: Path, dtype: str | None = None, variant: str | None = None) -> Factory:
    """The pipeline saved in ``folder``, loaded from local files only, as ``--pipeline`` gives one
    (checked before anything is built: a folder that is no pipeline is named at once)."""
    if dtype is not None and dtype not in DTYPES:
        raise CalibrationError(f"--dtype {dtype!r}: one of {', '.join(DTYPES)}")
    where = path_text(str(folder))
    pipeline_class(folder)

    def build(seed: int) -> object:
        import torch
        from diffusers import DiffusionPipeline

        del seed  # the weights are the folder's: the seed draws the requests' noise only
        options: dict[str, object] = {"local_files_only": True}
        if dtype is not None:
            options["torch_dtype"] = getattr(torch, dtype)
        if variant is not None:
            options["variant"] = variant
        with warnings.catch_warnings():  # newer diffusers call it `dtype`; every one takes this
            warnings.filterwarnings("ignore", message=".*torch_dtype.*", category=FutureWarning)
            pipe = DiffusionPipeline.from_pretrained(str(folder), **options)
        pipe.set_progress_bar_config(disable=True)  # the command's own progress says where it is
        return pipe

    build_checked = checked_build(where, build, "loading", option="--model")
    return Factory(f"--model {where}", build_checked, None, option="--model")
